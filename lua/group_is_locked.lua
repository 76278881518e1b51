-- group_is_locked: whether any of the values of a grouped multi-lock is held by anyone with
-- a live entry (Redisson's isLocked()).
-- KEYS[1]    group hash G
-- ARGV[1]    now: the caller's wall clock in epoch ms
-- ARGV[2..]  the value fields
-- Returns    1  some value is held and its holder's expire_time is now or later
--            0  none is
local now = tonumber(ARGV[1])
for i = 2, #ARGV do
    local holder = redis.call('hget', KEYS[1], ARGV[i])
    if holder ~= false then
        local t = tonumber(redis.call('hget', KEYS[1], ARGV[i] .. ':' .. holder .. ':expire_time'))
        if t ~= nil and t >= now then
            return 1
        end
    end
end
return 0
