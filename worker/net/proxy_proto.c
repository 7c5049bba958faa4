/*
 * proxy_proto.c: the PROXY protocol header parser (see proxy_proto.h).
 */
#include "worker/net/net.h"

#include <arpa/inet.h>
#include <string.h>
#include <sys/socket.h>

#include "common/err.h"

#define PP2_TYPE_CRC32C 0x03

static const uint8_t pp_v2_sig[12] = {0x0D, 0x0A, 0x0D, 0x0A, 0x00, 0x0D, 0x0A, 0x51, 0x55, 0x49, 0x54, 0x0A};

static int pp_refuse(struct proxy_proto *pp, const char *why)
{
	pp->why = why;
	return WEIR_ERR(PROXY_PROTOCOL);
}

uint32_t proxy_proto_crc32c(uint32_t crc, const void *p, size_t n)
{
	const uint8_t *b = p;

	/* bit by bit: at most PROXY_PROTO_MAX bytes, once per connection that
	 * sends the TLV, is not worth a table */
	crc = ~crc;
	while (n--) {
		crc ^= *b++;
		for (int k = 0; k < 8; k++)
			crc = (crc >> 1) ^ (0x82F63B78u & (0u - (crc & 1)));
	}
	return ~crc;
}

/* ---- version 1 ----------------------------------------------------- */

/* The next field of [*s, e): up to a single space or the end. Returns its
 * length, 0 when it is empty (two spaces, a space at either end). */
static size_t pp_v1_field(const char **s, const char *e, const char **tok)
{
	const char *q = *s;

	*tok = q;
	while (q < e && *q != ' ')
		q++;
	if (q == *s)
		return 0;
	*s = q < e ? q + 1 : q; /* past exactly one space */
	if (q < e && *s == e)
		return 0; /* a space before the CRLF */
	return (size_t)(q - *tok);
}

/* Decimal 0..<max> without leading zeros. Returns the value or -1. */
static long pp_v1_number(const char *t, size_t n, long max)
{
	long v = 0;

	if (n == 0 || n > 5 || (n > 1 && t[0] == '0'))
		return -1;
	for (size_t i = 0; i < n; i++) {
		if (t[i] < '0' || t[i] > '9')
			return -1;
		v = v * 10 + (t[i] - '0');
	}
	return v <= max ? v : -1;
}

static int pp_v1_ipv4(const char *t, size_t n, uint8_t *out)
{
	size_t i = 0;

	for (int k = 0; k < 4; k++) {
		size_t j = i;
		long v;

		while (j < n && t[j] != '.')
			j++;
		if ((k < 3) != (j < n))
			return -1; /* three dots exactly */
		if (j - i > 3 || (v = pp_v1_number(t + i, j - i, 255)) < 0)
			return -1;
		out[k] = (uint8_t)v;
		i = j + 1;
	}
	return 0;
}

static int pp_v1_ipv6(const char *t, size_t n, uint8_t *out)
{
	char s[INET6_ADDRSTRLEN];

	if (n < 2 || n >= sizeof(s))
		return -1;
	memcpy(s, t, n);
	s[n] = '\0';
	return inet_pton(AF_INET6, s, out) == 1 ? 0 : -1;
}

/* "TCP4 SRC DST SPORT DPORT", "TCP6 ..." or "UNKNOWN[ anything]": the line
 * between "PROXY " and the CRLF. */
static int pp_v1_line(const char *s, const char *e, struct proxy_proto *pp)
{
	const char *tok[5];
	size_t len[5];
	long sport, dport;
	int v6;

	if (e - s >= 7 && memcmp(s, "UNKNOWN", 7) == 0 && (e - s == 7 || s[7] == ' ')) {
		pp->local = 1; /* the rest, if any, is to be ignored */
		return 0;
	}
	len[0] = pp_v1_field(&s, e, &tok[0]);
	if (len[0] != 4 || (memcmp(tok[0], "TCP4", 4) != 0 && memcmp(tok[0], "TCP6", 4) != 0))
		return pp_refuse(pp, "v1: protocol is not TCP4, TCP6 or UNKNOWN");
	v6 = tok[0][3] == '6';
	for (int i = 1; i < 5; i++)
		if ((len[i] = pp_v1_field(&s, e, &tok[i])) == 0)
			return pp_refuse(pp, "v1: a field is missing or not separated by exactly one space");
	if (s != e)
		return pp_refuse(pp, "v1: more than five fields");
	pp->family = v6 ? AF_INET6 : AF_INET;
	if (v6 ? pp_v1_ipv6(tok[1], len[1], pp->src) : pp_v1_ipv4(tok[1], len[1], pp->src))
		return pp_refuse(pp, "v1: bad source address");
	if (v6 ? pp_v1_ipv6(tok[2], len[2], pp->dst) : pp_v1_ipv4(tok[2], len[2], pp->dst))
		return pp_refuse(pp, "v1: bad destination address");
	if ((sport = pp_v1_number(tok[3], len[3], 65535)) < 0 || (dport = pp_v1_number(tok[4], len[4], 65535)) < 0)
		return pp_refuse(pp, "v1: bad port");
	pp->sport = (uint16_t)sport;
	pp->dport = (uint16_t)dport;
	return 0;
}

static int pp_v1(const uint8_t *p, size_t n, struct proxy_proto *pp)
{
	static const char sig[] = "PROXY ";
	size_t lim = n < PROXY_PROTO_V1_MAX ? n : PROXY_PROTO_V1_MAX;
	size_t i;

	for (i = 0; i < lim && i < 6; i++)
		if (p[i] != (uint8_t)sig[i])
			return pp_refuse(pp, "not a PROXY protocol header");
	for (; i < lim && p[i] != '\r'; i++)
		if (p[i] < 0x20 || p[i] > 0x7e)
			return pp_refuse(pp, "v1: control or non-ASCII byte before the CRLF");
	if (i == lim)
		return n >= PROXY_PROTO_V1_MAX ? pp_refuse(pp, "v1: no CRLF in 107 bytes") : WEIR_EAGAIN;
	if (i + 1 >= PROXY_PROTO_V1_MAX)
		return pp_refuse(pp, "v1: no CRLF in 107 bytes");
	if (i + 1 == n)
		return WEIR_EAGAIN;
	if (p[i + 1] != '\n')
		return pp_refuse(pp, "v1: CR without LF");
	pp->version = 1;
	pp->len = (uint32_t)(i + 2);
	return pp_v1_line((const char *)p + 6, (const char *)p + i, pp);
}

/* ---- version 2 ----------------------------------------------------- */

/* Walks the TLVs in [<off>, <len>) of header <p>: each must fit, and a
 * CRC32C one must hold the checksum of the header with itself zeroed. */
static int pp_v2_tlvs(const uint8_t *p, size_t off, size_t len, struct proxy_proto *pp)
{
	static const uint8_t zero[4];

	while (off < len) {
		size_t tlen;

		if (len - off < 3)
			return pp_refuse(pp, "v2: TLV cut short");
		tlen = (size_t)p[off + 1] << 8 | p[off + 2];
		if (tlen > len - off - 3)
			return pp_refuse(pp, "v2: TLV longer than the header");
		if (p[off] == PP2_TYPE_CRC32C) {
			size_t v = off + 3;
			uint32_t want, got;

			if (tlen != 4)
				return pp_refuse(pp, "v2: CRC32C TLV not 4 bytes long");
			want = (uint32_t)p[v] << 24 | (uint32_t)p[v + 1] << 16 | (uint32_t)p[v + 2] << 8 | p[v + 3];
			got = proxy_proto_crc32c(0, p, v);
			got = proxy_proto_crc32c(got, zero, 4);
			got = proxy_proto_crc32c(got, p + v + 4, len - v - 4);
			if (got != want)
				return pp_refuse(pp, "v2: CRC32C mismatch");
		}
		off += 3 + tlen;
	}
	return 0;
}

static int pp_v2(const uint8_t *p, size_t n, struct proxy_proto *pp)
{
	size_t len, asize;

	for (size_t i = 0; i < n && i < sizeof(pp_v2_sig); i++)
		if (p[i] != pp_v2_sig[i])
			return pp_refuse(pp, "not a PROXY protocol header");
	if (n > 12 && (p[12] >> 4 != 2 || (p[12] & 0x0F) > 1))
		return pp_refuse(pp, p[12] >> 4 != 2 ? "v2: version is not 2" : "v2: command is not LOCAL or PROXY");
	if (n > 13 && (p[13] >> 4 > 3 || (p[13] & 0x0F) > 2))
		return pp_refuse(pp, "v2: unassigned address family or protocol");
	if (n < 16)
		return WEIR_EAGAIN;
	len = 16 + ((size_t)p[14] << 8 | p[15]);
	if (len > PROXY_PROTO_MAX)
		return pp_refuse(pp, "v2: header longer than 4096 bytes");
	pp->version = 2;
	pp->len = (uint32_t)len;
	if ((p[12] & 0x0F) == 0) { /* LOCAL: the block, whatever it holds, is skipped */
		if (n < len)
			return WEIR_EAGAIN;
		pp->local = 1;
		return 0;
	}
	switch (p[13]) {
	case 0x00: asize = 0; break;           /* UNSPEC */
	case 0x11: case 0x12: asize = 12; break; /* TCP, UDP over IPv4 */
	case 0x21: case 0x22: asize = 36; break; /* over IPv6 */
	case 0x31: case 0x32: asize = 216; break; /* AF_UNIX */
	default: return pp_refuse(pp, "v2: family and protocol are not a valid pair");
	}
	if (len - 16 < asize)
		return pp_refuse(pp, "v2: address block longer than the header");
	if (n < len)
		return WEIR_EAGAIN;
	if (pp_v2_tlvs(p, 16 + asize, len, pp) < 0)
		return WEIR_ERR(PROXY_PROTOCOL);
	if (p[13] != 0x11 && p[13] != 0x21) {
		/* valid, but not TCP over IP: the spec's fallback to UNSPEC */
		pp->local = 1;
		return 0;
	}
	pp->family = p[13] == 0x11 ? AF_INET : AF_INET6;
	asize = p[13] == 0x11 ? 4 : 16;
	memcpy(pp->src, p + 16, asize);
	memcpy(pp->dst, p + 16 + asize, asize);
	pp->sport = (uint16_t)(p[16 + 2 * asize] << 8 | p[17 + 2 * asize]);
	pp->dport = (uint16_t)(p[18 + 2 * asize] << 8 | p[19 + 2 * asize]);
	return 0;
}

int proxy_proto_parse(const void *p, size_t n, struct proxy_proto *pp)
{
	const uint8_t *b = p;

	memset(pp, 0, sizeof(*pp));
	if (n == 0)
		return WEIR_EAGAIN;
	if (b[0] == 'P')
		return pp_v1(b, n, pp);
	if (b[0] == pp_v2_sig[0])
		return pp_v2(b, n, pp);
	return pp_refuse(pp, "not a PROXY protocol header");
}
