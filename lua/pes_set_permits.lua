-- pes_set_permits: make the total permits (available + out) of a permit-expirable
-- semaphore equal to ARGV[1] (Redisson's setPermits). Reclaims nothing.
-- KEYS[1]  N, a string holding the available count
-- KEYS[2]  channel redisson_sc:{N}
-- KEYS[3]  zset {N}:timeout
-- ARGV[1]  the total wanted (an integer >= 0)
-- ARGV[2]  publish command, PUBLISH or SPUBLISH
-- Returns  nil. N missing: set to ARGV[1]. Otherwise N is raised or lowered by the
--          difference (nothing when there is none). ARGV[1] is published whenever
--          something was written.
local value = redis.call('get', KEYS[1])
if value == false then
    redis.call('set', KEYS[1], ARGV[1])
    redis.call(ARGV[2], KEYS[2], ARGV[1])
    return nil
end
local total = tonumber(value) + redis.call('zcount', KEYS[3], 0, '+inf')
if total == tonumber(ARGV[1]) then
    return nil
end
redis.call('incrby', KEYS[1], tonumber(ARGV[1]) - total)
redis.call(ARGV[2], KEYS[2], ARGV[1])
return nil
