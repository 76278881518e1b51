-- semaphore_try_set: set a semaphore's permits if it has none yet (Redisson's
-- trySetPermits, RSemaphore and RPermitExpirableSemaphore alike; PROTOCOL.md 14).
-- KEYS[1]  N, a string holding the available count
-- KEYS[2]  channel redisson_sc:{N} (redisson_sc:N when N has a '{')
-- ARGV[1]  permits to set (an integer >= 0)
-- ARGV[2]  publish command, PUBLISH or SPUBLISH
-- Returns  1  N was missing: set to ARGV[1], and ARGV[1] published
--          0  N exists: nothing written, nothing published
local value = redis.call('get', KEYS[1])
if value == false then
    redis.call('set', KEYS[1], ARGV[1])
    redis.call(ARGV[2], KEYS[2], ARGV[1])
    return 1
end
return 0
