-- fair_join_queue (included by fair_acquire and nrfair_acquire, after the lock was found
-- taken or not this caller's turn): a queued caller is told the holder's PTTL; a new one
-- joins the queue behind the last waiter with a deadline and is told how long to wait.
-- Returns from the script in every case.
-- Expects  KEYS[1]     lock hash N
--          KEYS[2]     queue redisson_lock_queue:{N}
--          KEYS[3]     deadlines redisson_lock_timeout:{N}
--          ARGV[2]     owner field
--          local now   the caller's wall clock in epoch ms (its ARGV string)
--          local wait  this caller's wait in ms (its ARGV string)
-- Returns  integer  ms to wait before retrying: the holder's PTTL (0 when none), or the
--                   time until the previous waiter's deadline when joining behind it
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
    ttl = tonumber(last_deadline) - tonumber(now)
else
    ttl = redis.call('pttl', KEYS[1])
end
local deadline = ttl + tonumber(wait) + tonumber(now)
if redis.call('zadd', KEYS[3], deadline, ARGV[2]) == 1 then
    redis.call('rpush', KEYS[2], ARGV[2])
end
return ttl
