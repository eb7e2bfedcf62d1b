/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Verifiable message payloads for the selftests: a caller's header at the
 * start (truncated when the message is shorter), then 8-byte pattern words
 * derived from a seed, cheap to write and to check.
 */
#ifndef RRDS_PAYLOAD_H
#define RRDS_PAYLOAD_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* splitmix64: the finaliser, and the generator on top of it. */
static inline uint64_t mix64(uint64_t x)
{
	x ^= x >> 30;
	x *= 0xbf58476d1ce4e5b9ULL;
	x ^= x >> 27;
	x *= 0x94d049bb133111ebULL;
	return x ^ (x >> 31);
}

static inline uint64_t next64(uint64_t *state)
{
	*state += 0x9e3779b97f4a7c15ULL;
	return mix64(*state);
}

/* Word @i of a payload: different for every seed and position. */
static inline uint64_t pattern_word(uint64_t seed, size_t i)
{
	uint64_t x = (seed + i) * 0x9e3779b97f4a7c15ULL;

	return x ^ (x >> 29);
}

/* Fills @size bytes: @hdr_len bytes of @hdr, then pattern words of @seed. */
static inline void payload_fill(unsigned char *buf, size_t size, const void *hdr, size_t hdr_len,
				uint64_t seed)
{
	uint64_t *p = (uint64_t *)(buf + hdr_len), last;
	size_t words, i;

	memcpy(buf, hdr, size < hdr_len ? size : hdr_len);
	if (size <= hdr_len)
		return;
	words = (size - hdr_len) / 8;
	for (i = 0; i < words; i++)
		p[i] = pattern_word(seed, i);
	last = pattern_word(seed, words);
	memcpy(p + words, &last, (size - hdr_len) % 8);
}

/* The offset of the first byte that differs from payload_fill()'s, or -1. */
static inline long payload_mismatch(const unsigned char *buf, size_t size, const void *hdr,
				    size_t hdr_len, uint64_t seed)
{
	const unsigned char *hb = hdr;
	const uint64_t *p = (const uint64_t *)(buf + hdr_len);
	size_t words, i, j;
	uint64_t want;

	for (i = 0; i < size && i < hdr_len; i++)
		if (buf[i] != hb[i])
			return i;
	if (size <= hdr_len)
		return -1;
	words = (size - hdr_len) / 8;
	for (i = 0; i <= words; i++) {
		size_t n = i < words ? 8 : (size - hdr_len) % 8;

		want = pattern_word(seed, i);
		if (i < words && p[i] == want)
			continue;
		for (j = 0; j < n; j++)
			if (buf[hdr_len + i * 8 + j] != ((const unsigned char *)&want)[j])
				return hdr_len + i * 8 + j;
	}
	return -1;
}

/*
 * For a report on a payload that differs first at @bad: how many bytes
 * differ, the last, how many of them are zero, and 8 bytes got and wanted
 * at @bad; in @out. A run of a packet's length at a packet boundary points
 * at the wire, zeros at memory never written, scattered bytes at a copy.
 */
static inline void payload_describe(char *out, size_t len, const unsigned char *buf, size_t size,
				    const void *hdr, size_t hdr_len, uint64_t seed, long bad)
{
	unsigned char *want = malloc(size ? size : 1);
	size_t i, differ = 0, zero = 0, last = 0, at = (size_t)bad;
	uint64_t got8 = 0, want8 = 0;

	if (!want) {
		snprintf(out, len, "(no memory to describe it)");
		return;
	}
	payload_fill(want, size, hdr, hdr_len, seed);
	for (i = 0; i < size; i++) {
		if (buf[i] == want[i])
			continue;
		differ++;
		zero += !buf[i];
		last = i;
	}
	memcpy(&got8, buf + at, size - at < 8 ? size - at : 8);
	memcpy(&want8, want + at, size - at < 8 ? size - at : 8);
	free(want);
	snprintf(out, len, "%zu bytes differ (%zu of them zero), the last at %zu; at %ld got %016llx, want %016llx",
		 differ, zero, last, bad, (unsigned long long)got8, (unsigned long long)want8);
}

#endif /* RRDS_PAYLOAD_H */
