-- group_blocker (included by group_acquire, group_try_acquire): finds whether another
-- owner holds one of the values with a live entry (its expire_time after now). Entries
-- whose expire_time has passed do not block: expiry is per value and lazy.
-- Expects  KEYS[1]       group hash G (value field F = holder; F:<holder>:expire_time,
--                        F:<holder>:lock_count)
--          ARGV[4..]     the value fields
--          local now     the caller's wall clock in epoch ms (a number)
--          local owner   the caller's owner field
-- Leaves   local existed  whether G existed
--          local blocker  the latest live expire_time of another owner among the values,
--                         or -1 when none blocks
local existed = redis.call('exists', KEYS[1]) == 1
local blocker = -1
if existed then
    for i = 4, #ARGV do
        local holder = redis.call('hget', KEYS[1], ARGV[i])
        if holder ~= false and holder ~= owner then
            local t = tonumber(redis.call('hget', KEYS[1], ARGV[i] .. ':' .. holder .. ':expire_time'))
            if t ~= nil and t > now and t > blocker then
                blocker = t
            end
        end
    end
end
