-- ident_write: writes a credisson client's identity record (who it is, what it holds and
-- waits for, since when), which the state calls join with the locks. Redisson never reads
-- these keys. Sent by the client's watchdog thread, never on an acquire's or release's path.
-- KEYS[1]    the record: hash "{credisson}:client:<uuid>"
-- KEYS[2]    the registry: zset "{credisson}:clients", member <uuid>, score the record's
--            expiry (epoch ms, the writer's clock)
-- ARGV[1]    the record's TTL in ms (>= 1)
-- ARGV[2]    now, epoch ms (the writer's clock)
-- ARGV[3]    the client's uuid
-- ARGV[4]    "1": the whole record (it is deleted first), "0": the fields below change
-- ARGV[5]    n, the number of field/value pairs that follow
-- ARGV[6 .. 5+2n]   field, value, field, value, ...: set
-- ARGV[6+2n ..]     fields to delete
-- Returns    1. Registry members whose records expired over 10 minutes ago (on the
--            writer's clock) are dropped; the registry's TTL is kept at least ARGV[1].
local ttl = tonumber(ARGV[1])
local now = tonumber(ARGV[2])
local n = tonumber(ARGV[5])
if ARGV[4] == '1' then
    redis.call('del', KEYS[1])
end
local i = 6
while i < 6 + 2 * n do
    redis.call('hset', KEYS[1], ARGV[i], ARGV[i + 1])
    i = i + 2
end
for j = 6 + 2 * n, #ARGV do
    redis.call('hdel', KEYS[1], ARGV[j])
end
redis.call('pexpire', KEYS[1], ttl)
redis.call('zadd', KEYS[2], now + ttl, ARGV[3])
redis.call('zremrangebyscore', KEYS[2], '-inf', now - 600000)
if redis.call('pttl', KEYS[2]) < ttl then
    redis.call('pexpire', KEYS[2], ttl)
end
return 1
