-- semaphore_drain: take every available permit (Redisson's RSemaphore.drainPermits).
-- KEYS[1]  N, a string holding the available count
-- ARGV[]   none
-- Returns  the count N held, as a bulk string ("3"), N then set to 0;
--          the integer 0 when N is missing (nothing written). Nothing is published.
local value = redis.call('get', KEYS[1])
if value == false then
    return 0
end
redis.call('set', KEYS[1], 0)
return value
