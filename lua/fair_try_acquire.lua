-- fair_try_acquire: take a Redisson RFairLock only if free and this caller's turn; never
-- joins the queue (PROTOCOL.md 8.4). Note Redisson's argument order: now before wait.
-- KEYS[1]  lock hash N
-- KEYS[2]  queue redisson_lock_queue:{N}
-- KEYS[3]  deadlines redisson_lock_timeout:{N}
-- ARGV[1]  lease in ms
-- ARGV[2]  owner field
-- ARGV[3]  now: the caller's wall clock in epoch ms
-- ARGV[4]  wait in ms (subtracted from the remaining waiters' deadlines on success)
-- Returns  nil  acquired (or re-entered)
--          1    not acquired
while true do
    local first = redis.call('lindex', KEYS[2], 0)
    if first == false then
        break
    end
    local deadline = redis.call('zscore', KEYS[3], first)
    if deadline ~= false and tonumber(deadline) <= tonumber(ARGV[3]) then
        redis.call('zrem', KEYS[3], first)
        redis.call('lpop', KEYS[2])
    else
        break
    end
end
if (redis.call('exists', KEYS[1]) == 0) and
    ((redis.call('exists', KEYS[2]) == 0) or (redis.call('lindex', KEYS[2], 0) == ARGV[2])) then
    redis.call('lpop', KEYS[2])
    redis.call('zrem', KEYS[3], ARGV[2])
    local rest = redis.call('zrange', KEYS[3], 0, -1)
    for i = 1, #rest do
        redis.call('zincrby', KEYS[3], -tonumber(ARGV[4]), rest[i])
    end
    redis.call('hset', KEYS[1], ARGV[2], 1)
    redis.call('pexpire', KEYS[1], ARGV[1])
    return nil
end
if redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
    redis.call('hincrby', KEYS[1], ARGV[2], 1)
    redis.call('pexpire', KEYS[1], ARGV[1])
    return nil
end
return 1
