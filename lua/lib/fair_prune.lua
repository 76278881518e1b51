-- fair_prune (included by the fair_* scripts): drop the waiters at the head of a fair lock's
-- queue whose deadline has passed; they are presumed dead. Stops at the first waiter whose
-- deadline is still ahead (or who has none).
-- Expects  KEYS[2]    queue redisson_lock_queue:{N}
--          KEYS[3]    deadlines redisson_lock_timeout:{N}
--          local now  the caller's wall clock in epoch ms (its ARGV string)
-- Leaves   nothing defined.
while true do
    local first = redis.call('lindex', KEYS[2], 0)
    if first == false then
        break
    end
    local deadline = redis.call('zscore', KEYS[3], first)
    if deadline ~= false and tonumber(deadline) <= tonumber(now) then
        redis.call('zrem', KEYS[3], first)
        redis.call('lpop', KEYS[2])
    else
        break
    end
end
