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
local now, wait = ARGV[4], ARGV[3]
-- @include fair_prune
-- @include fair_take_turn
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
