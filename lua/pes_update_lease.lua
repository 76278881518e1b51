-- pes_update_lease: give a permit a new deadline, after reclaiming expired permits
-- (Redisson's updateLeaseTime).
-- KEYS[1]  N, a string holding the available count
-- KEYS[2]  zset {N}:timeout
-- KEYS[3]  channel redisson_sc:{N}
-- ARGV[1]  the permit id (16 bytes)
-- ARGV[2]  its new deadline: the caller's wall clock (epoch ms) + lease, or
--          922337203685477 for no lease
-- ARGV[3]  now: the caller's wall clock, epoch ms
-- ARGV[4]  publish command, PUBLISH or SPUBLISH
-- Returns  1  the id is a permit out: its score set to ARGV[2]
--          0  it is not (never issued, released, or expired and reclaimed just now)
local timeouts, channel, now, publish = KEYS[2], KEYS[3], ARGV[3], ARGV[4]
local reclaim_limit = -1
-- @include pes_reclaim
if redis.call('zscore', KEYS[2], ARGV[1]) ~= false then
    redis.call('zadd', KEYS[2], ARGV[2], ARGV[1])
    return 1
end
return 0
