-- rlock_unlock: release one hold of a Redisson RLock, idempotent per request id
-- (PROTOCOL.md 5.2).
-- KEYS[1]  lock hash N
-- KEYS[2]  channel redisson_lock__channel:{N}
-- KEYS[3]  unlock latch redisson_unlock_latch:{N}:<rid>
-- ARGV[1]  message published on full release ("0")
-- ARGV[2]  re-arm lease in ms, set when holds remain
-- ARGV[3]  owner field
-- ARGV[4]  publish command, PUBLISH or SPUBLISH
-- ARGV[5]  latch TTL in ms (>= 1)
-- Returns  1+n  released: N deleted, ARGV[1] published, latch = 1; n is the number of
--               connections the message reached (Redisson returns 1; credisson uses n
--               to defer its own next attempt while others were woken)
--          0    still held by this owner (count - 1, TTL re-armed), latch = 0
--          nil  this owner holds nothing (no write, no publish, no latch)
--          a retry with the same latch replays the first result (1 for a release).
local hash, field, lease, latch, latch_ttl = KEYS[1], ARGV[3], ARGV[2], KEYS[3], ARGV[5]
-- @include latch_replay
if redis.call('hexists', hash, field) == 0 then
    return nil
end
-- @include hold_drop
redis.call('del', hash)
local reached = redis.call(ARGV[4], KEYS[2], ARGV[1])
redis.call('set', latch, '1', 'px', latch_ttl)
return 1 + reached
