-- ratelimiter_try_acquire: take permits from a Redisson RRateLimiter (a sliding window of
-- permit records), or learn how long to wait.
-- KEYS[1]  config hash N
-- KEYS[2]  {N}:value (permits left, OVERALL)      KEYS[3]  {N}:value:<client uuid>
-- KEYS[4]  {N}:permits (records, OVERALL)        KEYS[5]  {N}:permits:<client uuid>
-- ARGV[1]  permits to take (1 <= permits <= rate)
-- ARGV[2]  now: the caller's wall clock in epoch ms (the record's score)
-- ARGV[3]  16 random bytes naming the record (a new value per call)
-- Returns  nil      taken: one record (random, permits) scored now, the value lowered
--          integer  not enough permits, nothing taken: ms until enough records expire,
--                   plus 3 (Redisson's margin): from the record whose expiry completes the
--                   request (Redisson always counts from the oldest one)
--          error    "ERR RateLimiter is not initialized", "ERR Requested permits amount
--                   cannot exceed defined rate"
-- The value is kept between rate - (permits still recorded) and the rate, which Redisson's
-- script does not do: a value below that floor (state keys that outlived their records, a
-- missing value beside live records) would never refill and made its retry reply a Lua
-- error; one above the rate (a release counted twice) is cut to the rate, not to
-- rate - recorded, which dropped released permits. Then the TTL rule (ratelimiter_ttl).
-- @include ratelimiter_config
local permits, now = tonumber(ARGV[1]), tonumber(ARGV[2])
if permits > rate then
    return redis.error_reply('ERR Requested permits amount cannot exceed defined rate')
end
-- @include ratelimiter_records
local value = redis.call('get', value_key)
if value == false then
    -- Redisson starts from the rate; records still live keep their permits.
    reclaim(now)
    value = math.max(0, rate - used())
    redis.call('set', value_key, value)
else
    value = tonumber(value)
    local refilled = math.min(rate, value + reclaim(now))
    if refilled ~= value then
        value = refilled
        redis.call('set', value_key, value)
    end
end
local res = nil
if value < permits then
    local records = redis.call('zrange', permits_key, 0, -1, 'withscores')
    local recorded = 0
    for i = 1, #records, 2 do
        recorded = recorded + record_permits(records[i])
    end
    if value + recorded < rate then
        -- Value and records no longer add up to the rate: what is not recorded is free.
        value = rate - recorded
        redis.call('set', value_key, value)
    end
    if value < permits then
        -- value + recorded >= rate >= permits: some record's expiry completes the request.
        local have = value
        res = 3 + interval
        for i = 1, #records, 2 do
            have = have + record_permits(records[i])
            if have >= permits then
                res = 3 + interval - (now - tonumber(records[i + 1]))
                break
            end
        end
    end
end
if res == nil then
    redis.call('zadd', permits_key, ARGV[2], struct.pack('Bc0I', string.len(ARGV[3]), ARGV[3], permits))
    redis.call('decrby', value_key, permits)
end
-- @include ratelimiter_ttl
return res
