-- pes_add: add (or, negative, remove) available permits of a permit-expirable semaphore
-- (Redisson's RPermitExpirableSemaphore.addPermits). Not idempotent.
-- KEYS[1]  N, a string holding the available count
-- KEYS[2]  channel redisson_sc:{N}
-- ARGV[1]  permits to add (an integer, may be negative)
-- ARGV[2]  publish command, PUBLISH or SPUBLISH
-- Returns  nil. N set to its count (0 when missing) + ARGV[1]; ARGV[1], the amount, is
--          published when above 0 (unlike RSemaphore, which publishes the new count)
local value = redis.call('get', KEYS[1])
if value == false then
    value = 0
end
redis.call('set', KEYS[1], tonumber(value) + tonumber(ARGV[1]))
if tonumber(ARGV[1]) > 0 then
    redis.call(ARGV[2], KEYS[2], ARGV[1])
end
