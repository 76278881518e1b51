-- semaphore_try_set_ttl: set a semaphore's permits with a time to live if it has none
-- yet (Redisson's RSemaphore.trySetPermits(permits, ttl)).
-- KEYS[1]  N, a string holding the available count
-- KEYS[2]  channel redisson_sc:{N}
-- ARGV[1]  permits to set (an integer >= 0)
-- ARGV[2]  publish command, PUBLISH or SPUBLISH
-- ARGV[3]  time to live of N, in ms (> 0)
-- Returns  1  N was missing: set to ARGV[1] with PX ARGV[3], and ARGV[1] published
--          0  N exists: nothing written, nothing published
local value = redis.call('get', KEYS[1])
if value == false then
    redis.call('set', KEYS[1], ARGV[1], 'px', ARGV[3])
    redis.call(ARGV[2], KEYS[2], ARGV[1])
    return 1
end
return 0
