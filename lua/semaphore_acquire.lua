-- semaphore_acquire: take permits from a semaphore if enough are available (Redisson's
-- RSemaphore acquire and tryAcquire; the TTL of N, if any, is kept).
-- KEYS[1]  N, a string holding the available count
-- ARGV[1]  permits to take (an integer >= 1)
-- Returns  1  taken: N lowered by ARGV[1]
--          0  fewer than ARGV[1] available (or N missing): nothing written
local value = redis.call('get', KEYS[1])
if value ~= false and tonumber(value) >= tonumber(ARGV[1]) then
    redis.call('decrby', KEYS[1], ARGV[1])
    return 1
end
return 0
