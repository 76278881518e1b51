-- latch_count_down: lower a count-down latch by one (Redisson's countDown). Not
-- idempotent: never resent after a lost reply.
-- KEYS[1]  N, a string holding the count
-- KEYS[2]  channel redisson_countdownlatch__channel__{N}
-- ARGV[1]  message to publish when the count reaches zero ("0")
-- ARGV[2]  publish command, PUBLISH or SPUBLISH
-- Returns  nil. N is decremented; at zero or below it is deleted (a latch at zero and a
--          missing latch look the same), and reaching exactly zero publishes ARGV[1].
local count = redis.call('decr', KEYS[1])
if count <= 0 then
    redis.call('del', KEYS[1])
end
if count == 0 then
    redis.call(ARGV[2], KEYS[2], ARGV[1])
end
