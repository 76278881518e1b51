-- spin_unlock: release one hold of a Redisson RSpinLock, idempotent per request id. The
-- spin lock has no channel: nothing is published, its waiters poll.
-- KEYS[1]  lock hash N
-- KEYS[2]  unlock latch redisson_unlock_latch:{N}:<rid>
-- ARGV[1]  re-arm lease in ms, set when holds remain
-- ARGV[2]  owner field
-- ARGV[3]  latch TTL in ms (>= 1)
-- Returns  1    released: N deleted, latch = 1
--          0    still held by this owner (count - 1, TTL re-armed), latch = 0
--          nil  this owner holds nothing (no write, no latch)
--          a retry with the same latch replays the first result.
local hash, field, lease, latch, latch_ttl = KEYS[1], ARGV[2], ARGV[1], KEYS[2], ARGV[3]
-- @include latch_replay
if redis.call('hexists', hash, field) == 0 then
    return nil
end
-- @include hold_drop
redis.call('del', hash)
redis.call('set', latch, '1', 'px', latch_ttl)
return 1
