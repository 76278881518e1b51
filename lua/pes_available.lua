-- pes_available: the available permits of a permit-expirable semaphore, after reclaiming
-- every permit whose deadline is at or before now (Redisson's availablePermits).
-- KEYS[1]  N, a string holding the available count
-- KEYS[2]  zset {N}:timeout
-- KEYS[3]  channel redisson_sc:{N}
-- ARGV[1]  now: the caller's wall clock, epoch ms
-- ARGV[2]  publish command, PUBLISH or SPUBLISH
-- Returns  the count: an integer after a reclaim (which publishes it when above 0), else
--          N's value as a bulk string, or the integer 0 when N is missing
local timeouts, channel, now, publish = KEYS[2], KEYS[3], ARGV[1], ARGV[2]
local reclaim_limit = -1
-- @include pes_reclaim
if available ~= nil then
    return available
end
local value = redis.call('get', KEYS[1])
if value == false then
    return 0
end
return value
