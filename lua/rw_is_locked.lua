-- rw_is_locked: whether a Redisson RReadWriteLock is locked in a mode (PROTOCOL.md 7.5).
-- KEYS[1]  lock hash N
-- ARGV[1]  "read" or "write"
-- Returns  1 or 0. Write: mode is "write". Read (Redisson 3.24+): mode is "read", or
--          mode is "write" and some owner also holds a read hold (more than 2 fields).
local mode = redis.call('hget', KEYS[1], 'mode')
if mode == ARGV[1] then
    return 1
end
if ARGV[1] == 'read' and mode == 'write' and redis.call('hlen', KEYS[1]) > 2 then
    return 1
end
return 0
