-- pes_release: give back one permit by its id (Redisson's RPermitExpirableSemaphore
-- release(id) / tryRelease(id)). Reclaims nothing else. Not idempotent in its message.
-- KEYS[1]  N, a string holding the available count
-- KEYS[2]  channel redisson_sc:{N}
-- KEYS[3]  zset {N}:timeout
-- ARGV[1]  the permit id (16 bytes)
-- ARGV[2]  permits it stands for ("1")
-- ARGV[3]  now: the caller's wall clock, epoch ms
-- ARGV[4]  publish command, PUBLISH or SPUBLISH
-- Returns  1  released: the id removed, N raised, the new count published
--          2  released the same way, but its deadline had passed (at or before ARGV[3]):
--             the holder was past its lease (Redisson replies 0 here and throws)
--          0  the id is not in the zset (never issued, released, or reclaimed):
--             nothing written, nothing published
local deadline = redis.call('zscore', KEYS[3], ARGV[1])
local removed = redis.call('zrem', KEYS[3], ARGV[1])
if removed ~= 1 then
    return 0
end
local count = redis.call('incrby', KEYS[1], ARGV[2])
redis.call(ARGV[4], KEYS[2], count)
if tonumber(deadline) <= tonumber(ARGV[3]) then
    return 2
end
return 1
