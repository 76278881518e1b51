-- fair_force_unlock: delete a Redisson RFairLock whoever holds it and wake the queue head
-- (PROTOCOL.md 8.5).
-- KEYS[1]  lock hash N
-- KEYS[2]  queue redisson_lock_queue:{N}
-- KEYS[3]  deadlines redisson_lock_timeout:{N}
-- KEYS[4]  channel base redisson_lock__channel:{N}
-- ARGV[1]  message ("0")
-- ARGV[2]  now: the caller's wall clock in epoch ms
-- ARGV[3]  publish command, PUBLISH or SPUBLISH
-- Returns  1  N existed and was deleted (the head, if any, woken); 0 otherwise
while true do
    local first = redis.call('lindex', KEYS[2], 0)
    if first == false then
        break
    end
    local deadline = redis.call('zscore', KEYS[3], first)
    if deadline ~= false and tonumber(deadline) <= tonumber(ARGV[2]) then
        redis.call('zrem', KEYS[3], first)
        redis.call('lpop', KEYS[2])
    else
        break
    end
end
if redis.call('del', KEYS[1]) == 1 then
    local head = redis.call('lindex', KEYS[2], 0)
    if head ~= false then
        redis.call(ARGV[3], KEYS[4] .. ':' .. head, ARGV[1])
    end
    return 1
end
return 0
