-- ratelimiter_expire: a TTL for every key of a Redisson RRateLimiter (expire(Duration), the
-- RExpirable script Redisson runs over an object's keys).
-- KEYS[1..5]  config hash N, {N}:value, {N}:value:<client uuid>, {N}:permits,
--             {N}:permits:<client uuid>
-- ARGV[1]     TTL in ms (>= 1)
-- ARGV[2]     "" or a PEXPIRE condition (NX, XX, GT, LT; Redis 7.0+)
-- Returns     1 if a TTL was set on any of the keys, else 0
local result = 0
for i = 1, #KEYS do
    local set
    if ARGV[2] ~= '' then
        set = redis.call('pexpire', KEYS[i], ARGV[1], ARGV[2])
    else
        set = redis.call('pexpire', KEYS[i], ARGV[1])
    end
    if set == 1 then
        result = 1
    end
end
return result
