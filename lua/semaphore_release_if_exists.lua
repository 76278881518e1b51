-- semaphore_release_if_exists: give permits back only to a semaphore that exists
-- (Redisson 4's RSemaphore.releaseIfExists(permits)). Not idempotent: never resent after
-- a lost reply.
-- KEYS[1]  N, a string holding the available count
-- KEYS[2]  channel redisson_sc:{N} (redisson_sc:N when N has a '{')
-- ARGV[1]  permits to give back (an integer >= 1)
-- ARGV[2]  publish command, PUBLISH or SPUBLISH
-- Returns  1  N existed: raised by ARGV[1], and the new count published
--          0  N did not exist: nothing written, nothing published
if redis.call('exists', KEYS[1]) == 0 then
    return 0
end
local value = redis.call('incrby', KEYS[1], ARGV[1])
redis.call(ARGV[2], KEYS[2], value)
return 1
