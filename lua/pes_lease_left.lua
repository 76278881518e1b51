-- pes_lease_left: how long a permit's lease has left, after reclaiming expired permits
-- (Redisson's getLeaseTime).
-- KEYS[1]  N, a string holding the available count
-- KEYS[2]  zset {N}:timeout
-- KEYS[3]  channel redisson_sc:{N}
-- ARGV[1]  the permit id (16 bytes)
-- ARGV[2]  the no-lease deadline, 922337203685477
-- ARGV[3]  now: the caller's wall clock, epoch ms
-- ARGV[4]  publish command, PUBLISH or SPUBLISH
-- Returns  ms left (> 0: deadline - ARGV[3]); -1 the permit has no lease; 0 the id is not
--          a permit out
local timeouts, channel, now, publish = KEYS[2], KEYS[3], ARGV[3], ARGV[4]
local reclaim_limit = -1
-- @include pes_reclaim
local deadline = redis.call('zscore', KEYS[2], ARGV[1])
if deadline == false then
    return 0
end
if deadline == ARGV[2] then
    return -1
end
return tonumber(deadline) - tonumber(ARGV[3])
