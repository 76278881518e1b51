-- hold_drop (included by rlock_unlock, fair_unlock, rw_write_unlock): one hold of the
-- owner fewer. When holds remain the script ends here: TTL re-armed, latch 0, returns 0.
-- Otherwise it goes on with the owner's field at 0 (the caller deletes it or the hash).
-- Expects  local hash       the lock hash N
--          local field      the owner field
--          local lease      the re-arm lease in ms
--          local latch      the unlock latch
--          local latch_ttl  the latch's TTL in ms
-- Leaves   local count (0: the last hold went).
local count = redis.call('hincrby', hash, field, -1)
if count > 0 then
    redis.call('pexpire', hash, lease)
    redis.call('set', latch, '0', 'px', latch_ttl)
    return 0
end
