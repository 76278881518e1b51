-- lock_hash_guard (included by the force-unlock scripts that delete a lock hash): returns
-- from the script with N's type name when N exists but is not a lock: another type, or a
-- hash with a field that is not an owner's, or over 64 fields. Writes nothing.
-- Expects  KEYS[1]  lock hash N
-- Leaves   local kind: N's type, 'none' or 'hash' when the script goes on.
local kind = redis.call('type', KEYS[1])['ok']
if kind ~= 'none' then
    if kind ~= 'hash' then
        return kind
    end
    -- A lock hash holds owner fields "<uuid>:<id>" (":write", "mode" in a read-write
    -- lock's); anything else, or a big hash, is somebody's data.
    if redis.call('hlen', KEYS[1]) > 64 then
        return 'hash'
    end
    for _, f in ipairs(redis.call('hkeys', KEYS[1])) do
        if f ~= 'mode' and string.find(f, ':%d+$') == nil and string.find(f, ':%d+:write$') == nil then
            return 'hash'
        end
    end
end
