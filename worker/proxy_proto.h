/*
 * proxy_proto.h: parsing the PROXY protocol header (versions 1 and 2) that
 * an L4 balancer (HAProxy's send-proxy / send-proxy-v2, AWS NLB) puts in
 * front of a connection to tell the client's real address.
 *
 * Principle: a pure function of the bytes received so far, allocating
 * nothing, called again from the start as more arrive. It answers "need
 * more" only while what it has is a prefix of a header it would accept, so
 * a client that sends anything else (an HTTP request, a TLS ClientHello) is
 * refused at its first byte. Strict, per haproxy's doc/proxy-protocol.txt:
 *
 * Version 1, "PROXY TCP4|TCP6 SRC DST SPORT DPORT\r\n", at most 107 bytes
 * with the CRLF: exactly one space between fields; IPv4 as four decimal
 * numbers 0..255 without leading zeros ("0" itself is fine); IPv6 in any
 * form inet_pton(3) takes (the spec's groups of 4 hex digits, "::",
 * and the dotted IPv4 tail "::ffff:192.0.2.1" that inet_ntop writes);
 * both addresses of the family named; ports decimal 0..65535 without
 * leading zeros. "PROXY UNKNOWN" with anything printable up to the CRLF
 * means "use the socket's addresses". A lone CR or LF, a control byte or
 * a line without CRLF in 107 bytes is refused.
 *
 * Version 2: the 12-byte signature, version 2, command LOCAL (the block is
 * skipped unread: the socket's addresses stand) or PROXY; family and
 * protocol nibbles of assigned values only. TCP over IPv4 (0x11) and IPv6
 * (0x21) give the addresses; the other valid combinations (UNSPEC 0x00,
 * UDP 0x12/0x22, AF_UNIX 0x31/0x32) fall back to the socket's addresses, as
 * the spec asks of a receiver that does not implement them; any other
 * combination is refused. The address block must fit in the announced
 * length; the TLVs after it are walked and bounds-checked, and a CRC32C
 * TLV (0x03) must match the header. A header longer than PROXY_PROTO_MAX
 * is refused: no known sender comes near it, and it bounds what a
 * connection can make weir hold before it is known to be a balancer's.
 */
#ifndef WEIR_WORKER_PROXY_PROTO_H
#define WEIR_WORKER_PROXY_PROTO_H

#include <stddef.h>
#include <stdint.h>

/* The longest header accepted, both versions (v1 is at most 107). */
#define PROXY_PROTO_MAX 4096
#define PROXY_PROTO_V1_MAX 107

struct proxy_proto {
	uint32_t len;    /* header bytes, to consume; what follows is the client's */
	uint8_t version; /* 1 or 2 */
	/* 1: LOCAL, UNKNOWN or a family weir does not use: the connection's
	 * own addresses stand, the fields below are unset */
	uint8_t local;
	int family;       /* AF_INET or AF_INET6 */
	uint8_t src[16];  /* network order; 4 bytes used for AF_INET */
	uint8_t dst[16];
	uint16_t sport;   /* host order */
	uint16_t dport;
	const char *why;  /* on a refusal: what was wrong, for the log */
};

/*
 * Parses the <n> bytes at <p>, the first bytes of a connection. Returns 0
 * with *<pp> filled when they start with a complete header (<pp>->len
 * bytes), WEIR_EAGAIN when they are a prefix of one (every byte given is
 * then part of the header), or WEIR_ERR(PROXY_PROTOCOL) with <pp>->why set.
 */
int proxy_proto_parse(const void *p, size_t n, struct proxy_proto *pp);

/* CRC32C (Castagnoli, RFC 4960 appendix B) of <n> bytes at <p>, continuing
 * from <crc> (0 to start): the v2 checksum TLV's algorithm. */
uint32_t proxy_proto_crc32c(uint32_t crc, const void *p, size_t n);

#endif
