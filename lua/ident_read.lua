-- ident_read: reads credisson identity records (every KEYS[i] is one, all in the slot of
-- "{credisson}"), for the state calls' join. Writes nothing.
-- KEYS[i]    a record: hash "{credisson}:client:<uuid>"
-- ARGV[1]    the most fields to return per record (a record holding more gives its first
--            ARGV[1] fields in HSCAN order)
-- Returns    array r, r[i] the fields and values of KEYS[i] as HGETALL gives them ({} for a
--            record that does not exist)
local most = tonumber(ARGV[1])
local out = {}
for i = 1, #KEYS do
    if redis.call('hlen', KEYS[i]) <= most then
        out[i] = redis.call('hgetall', KEYS[i])
    else
        local got = {}
        local cursor = '0'
        repeat
            local step = redis.call('hscan', KEYS[i], cursor, 'COUNT', 100)
            cursor = step[1]
            for _, v in ipairs(step[2]) do
                if #got < 2 * most then
                    got[#got + 1] = v
                end
            end
        until cursor == '0' or #got >= 2 * most
        out[i] = got
    end
end
return out
