-- pes_release_many: give back several permits by id, all or nothing (Redisson's
-- RPermitExpirableSemaphore.release(List), 3.44+). Checks every id first, then reclaims
-- expired permits, then removes the ids.
-- KEYS[1]  N, a string holding the available count
-- KEYS[2]  channel redisson_sc:{N}
-- KEYS[3]  zset {N}:timeout
-- ARGV[1]  how many ids follow
-- ARGV[2]  now: the caller's wall clock, epoch ms
-- ARGV[3]  publish command, PUBLISH or SPUBLISH
-- ARGV[4..] the permit ids (16 bytes each, all different)
-- Returns  k >= 0  the ids removed by this call (N raised by k and k published when
--                  k > 0); fewer than ARGV[1] when some had expired and the reclaim
--                  took them first (the reclaim publishes the count when above 0)
--          -1  an id is not in the zset: nothing written, nothing published
for i = 4, #ARGV do
    if redis.call('zscore', KEYS[3], ARGV[i]) == false then
        return -1
    end
end
local timeouts, channel, now, publish = KEYS[3], KEYS[2], ARGV[2], ARGV[3]
local reclaim_limit = -1
-- @include pes_reclaim
local removed = redis.call('zrem', KEYS[3], unpack(ARGV, 4))
if removed == 0 then
    return 0
end
redis.call('incrby', KEYS[1], removed)
redis.call(ARGV[3], KEYS[2], removed)
return removed
