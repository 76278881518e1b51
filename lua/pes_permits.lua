-- pes_permits: the total permits of a permit-expirable semaphore (available + out),
-- after reclaiming expired permits (Redisson's getPermits).
-- KEYS[1]  N, a string holding the available count
-- KEYS[2]  zset {N}:timeout
-- KEYS[3]  channel redisson_sc:{N}
-- ARGV[1]  now: the caller's wall clock, epoch ms
-- ARGV[2]  publish command, PUBLISH or SPUBLISH
-- Returns  available + permits out (an integer); 0 when N is missing. A reclaim
--          publishes the new available count when above 0.
local timeouts, channel, now, publish = KEYS[2], KEYS[3], ARGV[1], ARGV[2]
local reclaim_limit = -1
-- @include pes_reclaim
local value = redis.call('get', KEYS[1])
if value == false then
    return 0
end
return tonumber(value) + redis.call('zcount', KEYS[2], 0, '+inf')
