-- ratelimiter_config (included by every ratelimiter_* script that reads the rate): the
-- limiter's configuration and the state keys of its mode; returns from the script with
-- an error when the configuration hash is incomplete or missing.
-- Expects  KEYS[1]  config hash N (rate, interval in ms, type "0" OVERALL / "1" PER_CLIENT,
--                   keepAliveTime in ms)
--          KEYS[2]  {N}:value            KEYS[3]  {N}:value:<client uuid>
--          KEYS[4]  {N}:permits          KEYS[5]  {N}:permits:<client uuid>
-- Leaves   local rate, interval  numbers
--          local value_key, permits_key  the state keys of the mode (KEYS[2], KEYS[4] for
--                   OVERALL; KEYS[3], KEYS[5] for PER_CLIENT)
local rate = redis.call('hget', KEYS[1], 'rate')
local interval = redis.call('hget', KEYS[1], 'interval')
local mode = redis.call('hget', KEYS[1], 'type')
if rate == false or interval == false or mode == false then
    return redis.error_reply('ERR RateLimiter is not initialized')
end
rate, interval = tonumber(rate), tonumber(interval)
local value_key, permits_key = KEYS[2], KEYS[4]
if mode == '1' then
    value_key, permits_key = KEYS[3], KEYS[5]
end
