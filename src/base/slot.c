/*
 * slot.c -- Redis Cluster's key slot: CRC16 (the XMODEM variant Redis uses: polynomial
 * 0x1021, initial value 0, no reflection) of the key's hash tag, modulo 16384.
 *
 * The hash tag is what lies between the first '{' and the first '}' after it, when at
 * least one byte lies between them; otherwise the whole key is hashed (PROTOCOL.md 2.3).
 * Every key and channel of a lock shares its name's slot, which is why routing by the
 * first key of a command is enough. Pure functions; any thread.
 */
#include "base.h"

uint16_t crd__crc16(const char *p, size_t len)
{
    uint16_t crc = 0;
    for (size_t i = 0; i < len; i++) {
        crc ^= (uint16_t)((uint16_t)(unsigned char)p[i] << 8);
        for (int b = 0; b < 8; b++)
            crc = (crc & 0x8000) ? (uint16_t)((crc << 1) ^ 0x1021) : (uint16_t)(crc << 1);
    }
    return crc;
}

int crd__key_slot(const char *key, size_t len)
{
    size_t open = 0;
    while (open < len && key[open] != '{')
        open++;
    if (open < len) {
        size_t close = open + 1;
        while (close < len && key[close] != '}')
            close++;
        if (close < len && close > open + 1)
            return crd__crc16(key + open + 1, close - open - 1) & (CRD__NSLOTS - 1);
    }
    return crd__crc16(key, len) & (CRD__NSLOTS - 1);
}
