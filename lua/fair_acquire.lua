-- fair_acquire: take a Redisson RFairLock, or join its FIFO queue (PROTOCOL.md 8.2, 8.3).
-- KEYS[1]  lock hash N
-- KEYS[2]  queue redisson_lock_queue:{N} (LIST of owner fields, head first)
-- KEYS[3]  deadlines redisson_lock_timeout:{N} (ZSET owner field -> epoch ms)
-- ARGV[1]  lease in ms
-- ARGV[2]  owner field
-- ARGV[3]  wait in ms: how long this waiter may hold up the queue once at its head
-- ARGV[4]  now: the caller's wall clock in epoch ms
-- Returns  nil          acquired (or re-entered)
--          integer      not acquired: ms to wait before retrying (the holder's PTTL, or
--                       the time until the previous waiter's deadline when joining the
--                       queue behind it; 0 = free but not this caller's turn)
-- Prologue: waiters at the head whose deadline has passed are presumed dead and purged.
while true do
    local first = redis.call('lindex', KEYS[2], 0)
    if first == false then
        break
    end
    local deadline = redis.call('zscore', KEYS[3], first)
    if deadline ~= false and tonumber(deadline) <= tonumber(ARGV[4]) then
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
    -- Everyone still queued moves up by this caller's wait.
    local rest = redis.call('zrange', KEYS[3], 0, -1)
    for i = 1, #rest do
        redis.call('zincrby', KEYS[3], -tonumber(ARGV[3]), rest[i])
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
if redis.call('zscore', KEYS[3], ARGV[2]) ~= false then
    -- Already queued: wait for the holder.
    local holder = redis.call('pttl', KEYS[1])
    return math.max(0, holder)
end
local ttl
local last = redis.call('lindex', KEYS[2], -1)
local last_deadline = false
if last ~= false and last ~= ARGV[2] then
    last_deadline = redis.call('zscore', KEYS[3], last)
end
if last_deadline ~= false then
    ttl = tonumber(last_deadline) - tonumber(ARGV[4])
else
    ttl = redis.call('pttl', KEYS[1])
end
local deadline = ttl + tonumber(ARGV[3]) + tonumber(ARGV[4])
if redis.call('zadd', KEYS[3], deadline, ARGV[2]) == 1 then
    redis.call('rpush', KEYS[2], ARGV[2])
end
return ttl
