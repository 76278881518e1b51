-- rw_read_renew: batched renewal of this client's own read holds (PROTOCOL.md 7.6), the
-- Redisson 4.4+ rule: only the renewer's fields, every hold's timeout key.
-- KEYS[2i-1] lock hash N_i;  KEYS[2i] its key prefix P_i   (i = 1 .. #KEYS/2)
-- ARGV[1]    timeout in ms
-- ARGV[i+1]  owner field F_i holding read holds on N_i
-- Returns    array r with r[i] = 1 when F_i still holds c >= 1 read holds on N_i: the
--            timeout keys P_i:F_i:rwlock_timeout:c .. :1 are set to ARGV[1] (recreated
--            if missing while the hold is live) and N_i's TTL raised to at least
--            ARGV[1]; r[i] = 0 when the hold is gone. Never creates N_i.
local result = {}
for i = 1, #KEYS / 2 do
    local name, prefix, field = KEYS[2 * i - 1], KEYS[2 * i], ARGV[i + 1]
    local ok, holds = pcall(function() return tonumber(redis.call('hget', name, field)) end)
    local renewed = ok and type(holds) == 'number' and holds >= 1
    if renewed then
        for j = holds, 1, -1 do
            redis.call('set', prefix .. ':' .. field .. ':rwlock_timeout:' .. j, 1, 'px', ARGV[1])
        end
        if redis.call('pttl', name) < tonumber(ARGV[1]) then
            redis.call('pexpire', name, ARGV[1])
        end
    end
    result[i] = renewed and 1 or 0
end
return result
