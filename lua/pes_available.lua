-- pes_available: the available permits of a permit-expirable semaphore, after reclaiming
-- every permit whose deadline is at or before now (Redisson's availablePermits).
-- KEYS[1]  N, a string holding the available count
-- KEYS[2]  zset {N}:timeout
-- KEYS[3]  channel redisson_sc:{N}
-- ARGV[1]  now: the caller's wall clock, epoch ms
-- ARGV[2]  publish command, PUBLISH or SPUBLISH
-- Returns  the count: an integer after a reclaim (which publishes it when above 0), else
--          N's value as a bulk string, or the integer 0 when N is missing
local expired = redis.call('zrangebyscore', KEYS[2], 0, ARGV[1], 'limit', 0, -1)
if #expired > 0 then
    redis.call('zrem', KEYS[2], unpack(expired))
    local count = redis.call('incrby', KEYS[1], #expired)
    if count > 0 then
        redis.call(ARGV[2], KEYS[3], count)
    end
    return count
end
local value = redis.call('get', KEYS[1])
if value == false then
    return 0
end
return value
