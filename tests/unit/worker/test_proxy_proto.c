/*
 * Unit tests for worker/net/proxy_proto.c: the PROXY protocol header parser,
 * versions 1 and 2, on whole headers, on every prefix of them (a header
 * that arrives a byte at a time), and on the malformed ones the spec says
 * to refuse.
 */
#include <CUnit/CUnit.h>
#include <arpa/inet.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

#include "common/err.h"
#include "worker/net/net.h"
#include "tests/unit/unit.h"

#define REFUSED WEIR_ERR(PROXY_PROTOCOL)

static const uint8_t sig[12] = {0x0D, 0x0A, 0x0D, 0x0A, 0x00, 0x0D, 0x0A, 0x51, 0x55, 0x49, 0x54, 0x0A};

/* Parses <n> bytes, and checks that every shorter prefix asks for more:
 * the header split across reads at any point gives the same answer. */
static int parse_all_splits(const void *p, size_t n, struct proxy_proto *pp)
{
	for (size_t k = 0; k < n; k++) {
		struct proxy_proto tmp;
		int rc = proxy_proto_parse(p, k, &tmp);

		if (rc != WEIR_EAGAIN)
			fprintf(stderr, "\n  prefix of %zu/%zu bytes: rc %d\n", k, n, rc);
		CU_ASSERT_EQUAL(rc, WEIR_EAGAIN);
	}
	return proxy_proto_parse(p, n, pp);
}

static int v1(const char *line, struct proxy_proto *pp)
{
	return parse_all_splits(line, strlen(line), pp);
}

/* Refused at once or after a prefix, never "need more" on the whole. */
static void v1_refused(const char *line)
{
	struct proxy_proto pp;
	int rc = proxy_proto_parse(line, strlen(line), &pp);

	if (rc != REFUSED)
		fprintf(stderr, "\n  not refused: \"%s\" (rc %d)\n", line, rc);
	CU_ASSERT_EQUAL(rc, REFUSED);
	if (rc == REFUSED)
		CU_ASSERT_PTR_NOT_NULL(pp.why);
}

static const char *addr_text(int family, const uint8_t *a)
{
	static char s[2][INET6_ADDRSTRLEN];
	static int k;

	k ^= 1;
	inet_ntop(family, a, s[k], sizeof(s[k]));
	return s[k];
}

static void test_v1_tcp4_gives_both_addresses_and_ports(void)
{
	struct proxy_proto pp;
	const char *h = "PROXY TCP4 192.0.2.1 198.51.100.7 56324 443\r\nGET / HTTP/1.1\r\n";

	CU_ASSERT_EQUAL(proxy_proto_parse(h, strlen(h), &pp), 0);
	CU_ASSERT_EQUAL(pp.len, strlen("PROXY TCP4 192.0.2.1 198.51.100.7 56324 443\r\n"));
	CU_ASSERT_EQUAL(pp.version, 1);
	CU_ASSERT_EQUAL(pp.local, 0);
	CU_ASSERT_EQUAL(pp.family, AF_INET);
	CU_ASSERT_STRING_EQUAL(addr_text(AF_INET, pp.src), "192.0.2.1");
	CU_ASSERT_STRING_EQUAL(addr_text(AF_INET, pp.dst), "198.51.100.7");
	CU_ASSERT_EQUAL(pp.sport, 56324);
	CU_ASSERT_EQUAL(pp.dport, 443);
	CU_ASSERT_EQUAL(v1("PROXY TCP4 192.0.2.1 198.51.100.7 56324 443\r\n", &pp), 0);
	CU_ASSERT_EQUAL(v1("PROXY TCP4 0.0.0.0 255.255.255.255 0 65535\r\n", &pp), 0);
	CU_ASSERT_STRING_EQUAL(addr_text(AF_INET, pp.dst), "255.255.255.255");
	CU_ASSERT_EQUAL(pp.sport, 0);
	CU_ASSERT_EQUAL(pp.dport, 65535);
}

static void test_v1_tcp6_takes_every_form_inet_ntop_writes(void)
{
	struct proxy_proto pp;
	const char *longest = "PROXY TCP6 ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff "
	                      "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff 65535 65535\r\n";

	CU_ASSERT_EQUAL(v1("PROXY TCP6 2001:db8::1 2001:db8::2 1234 80\r\n", &pp), 0);
	CU_ASSERT_EQUAL(pp.family, AF_INET6);
	CU_ASSERT_STRING_EQUAL(addr_text(AF_INET6, pp.src), "2001:db8::1");
	CU_ASSERT_STRING_EQUAL(addr_text(AF_INET6, pp.dst), "2001:db8::2");
	CU_ASSERT_EQUAL(v1("PROXY TCP6 ::ffff:192.0.2.1 ::1 1 2\r\n", &pp), 0);
	CU_ASSERT_STRING_EQUAL(addr_text(AF_INET6, pp.src), "::ffff:192.0.2.1");
	CU_ASSERT_EQUAL(v1("PROXY TCP6 2001:0DB8:0000:0000:0000:0000:0000:0001 :: 1 2\r\n", &pp), 0);
	CU_ASSERT_STRING_EQUAL(addr_text(AF_INET6, pp.src), "2001:db8::1");
	CU_ASSERT_EQUAL(strlen(longest), 104);
	CU_ASSERT_EQUAL(v1(longest, &pp), 0);
	CU_ASSERT_EQUAL(pp.len, 104);
}

static void test_v1_unknown_means_the_socket_addresses(void)
{
	struct proxy_proto pp;
	const char *worst = "PROXY UNKNOWN ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff "
	                    "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff 65535 65535\r\n";

	CU_ASSERT_EQUAL(v1("PROXY UNKNOWN\r\n", &pp), 0);
	CU_ASSERT_EQUAL(pp.local, 1);
	CU_ASSERT_EQUAL(pp.len, 15);
	CU_ASSERT_EQUAL(v1("PROXY UNKNOWN whatever  follows\r\n", &pp), 0);
	CU_ASSERT_EQUAL(pp.local, 1);
	CU_ASSERT_EQUAL(strlen(worst), 107);
	CU_ASSERT_EQUAL(v1(worst, &pp), 0);
	CU_ASSERT_EQUAL(pp.len, 107);
	v1_refused("PROXY UNKNOWNX\r\n");
	v1_refused("PROXY unknown\r\n");
}

static void test_v1_leading_zeros_and_out_of_range_numbers_are_refused(void)
{
	v1_refused("PROXY TCP4 01.2.3.4 5.6.7.8 1 2\r\n");
	v1_refused("PROXY TCP4 1.2.3.4 5.6.7.08 1 2\r\n");
	v1_refused("PROXY TCP4 1.2.3.256 5.6.7.8 1 2\r\n");
	v1_refused("PROXY TCP4 1.2.3.4 5.6.7.8 01 2\r\n");
	v1_refused("PROXY TCP4 1.2.3.4 5.6.7.8 1 65536\r\n");
	v1_refused("PROXY TCP4 1.2.3.4 5.6.7.8 1 123456\r\n");
	v1_refused("PROXY TCP4 1.2.3.4 5.6.7.8 -1 2\r\n");
	v1_refused("PROXY TCP4 1.2.3.4 5.6.7.8 +1 2\r\n");
	v1_refused("PROXY TCP4 1.2.3 5.6.7.8 1 2\r\n");
	v1_refused("PROXY TCP4 1.2.3.4.5 5.6.7.8 1 2\r\n");
	v1_refused("PROXY TCP4 1..3.4 5.6.7.8 1 2\r\n");
	v1_refused("PROXY TCP4 1.2.3.4. 5.6.7.8 1 2\r\n");
	v1_refused("PROXY TCP4 0x1.2.3.4 5.6.7.8 1 2\r\n");
}

static void test_v1_fields_need_exactly_one_space_and_the_right_family(void)
{
	v1_refused("PROXY  TCP4 1.2.3.4 5.6.7.8 1 2\r\n");
	v1_refused("PROXY TCP4  1.2.3.4 5.6.7.8 1 2\r\n");
	v1_refused("PROXY TCP4 1.2.3.4 5.6.7.8 1 2 \r\n");
	v1_refused("PROXY TCP4 1.2.3.4 5.6.7.8 1\r\n");
	v1_refused("PROXY TCP4 1.2.3.4 5.6.7.8 1 2 3\r\n");
	v1_refused("PROXY TCP4\t1.2.3.4 5.6.7.8 1 2\r\n");
	v1_refused("PROXY TCP5 1.2.3.4 5.6.7.8 1 2\r\n");
	v1_refused("PROXY tcp4 1.2.3.4 5.6.7.8 1 2\r\n");
	v1_refused("PROXY UDP4 1.2.3.4 5.6.7.8 1 2\r\n");
	v1_refused("PROXY TCP4 ::1 5.6.7.8 1 2\r\n");
	v1_refused("PROXY TCP6 1.2.3.4 ::1 1 2\r\n");
	v1_refused("PROXY TCP6 ::1 ::1%eth0 1 2\r\n");
	v1_refused("PROXY TCP6 1:2:3:4:5:6:7:8:9 ::1 1 2\r\n");
	v1_refused("PROXY TCP6 1::2::3 ::1 1 2\r\n");
	v1_refused("PROXY TCP4 1.2.3.4 5.6.7.8 1 2\r\r\n");
	v1_refused("PROXY\r\n");
	v1_refused("PROXY \r\n");
	v1_refused("PROXYTCP4 1.2.3.4 5.6.7.8 1 2\r\n");
}

static void test_v1_line_ends_only_with_crlf_within_107_bytes(void)
{
	char line[200];
	struct proxy_proto pp;

	v1_refused("PROXY TCP4 1.2.3.4 5.6.7.8 1 2\n");
	v1_refused("PROXY TCP4 1.2.3.4 5.6.7.8 1 2\rX");
	v1_refused("PROXY TCP4 1.2.3.4\n5.6.7.8 1 2\r\n");
	CU_ASSERT_EQUAL(proxy_proto_parse("PROXY TCP4 1.2.3.4 5.6.7.8 1 2\0\r\n", 33, &pp), REFUSED);
	v1_refused("PROXY TCP4 1.2.3.4 5.6.7.8 1 \x80\r\n");
	/* "PROXY UNKNOWN " and filler: a CRLF at 106..107 is one byte too far */
	memset(line, 'x', sizeof(line));
	memcpy(line, "PROXY UNKNOWN ", 14);
	memcpy(line + 105, "\r\n", 2);
	CU_ASSERT_EQUAL(proxy_proto_parse(line, 107, &pp), 0);
	memcpy(line + 105, "x\r\n", 3);
	CU_ASSERT_EQUAL(proxy_proto_parse(line, 106, &pp), WEIR_EAGAIN);
	CU_ASSERT_EQUAL(proxy_proto_parse(line, 107, &pp), REFUSED);
	CU_ASSERT_EQUAL(proxy_proto_parse(line, 108, &pp), REFUSED);
	memset(line, 'x', sizeof(line));
	memcpy(line, "PROXY UNKNOWN ", 14);
	CU_ASSERT_EQUAL(proxy_proto_parse(line, 106, &pp), WEIR_EAGAIN);
	CU_ASSERT_EQUAL(proxy_proto_parse(line, 107, &pp), REFUSED);
	CU_ASSERT_EQUAL(proxy_proto_parse(line, 200, &pp), REFUSED);
}

static void test_anything_else_is_refused_at_its_first_byte(void)
{
	struct proxy_proto pp;

	CU_ASSERT_EQUAL(proxy_proto_parse("", 0, &pp), WEIR_EAGAIN);
	CU_ASSERT_EQUAL(proxy_proto_parse("G", 1, &pp), REFUSED);
	CU_ASSERT_EQUAL(proxy_proto_parse("GET / HTTP/1.1\r\n", 16, &pp), REFUSED);
	CU_ASSERT_EQUAL(proxy_proto_parse("\x16\x03\x01", 3, &pp), REFUSED); /* a TLS ClientHello */
	CU_ASSERT_EQUAL(proxy_proto_parse("PRI * HTTP/2.0", 14, &pp), REFUSED);
	CU_ASSERT_EQUAL(proxy_proto_parse("POST", 4, &pp), REFUSED);
	CU_ASSERT_EQUAL(proxy_proto_parse("PROX", 4, &pp), WEIR_EAGAIN);
	CU_ASSERT_EQUAL(proxy_proto_parse("\r\n\r\n\0\r\nQUIX", 12, &pp), REFUSED);
	CU_ASSERT_EQUAL(proxy_proto_parse("\r\n\r\n", 4, &pp), WEIR_EAGAIN);
	CU_ASSERT_EQUAL(proxy_proto_parse("\r\n\r\nGET", 7, &pp), REFUSED);
}

/* ---- version 2 ----------------------------------------------------- */

/* A v2 header in <out>: <vc> version and command, <fam>, <nbody> bytes of
 * body (addresses then TLVs). Returns its length. */
static size_t v2(uint8_t *out, uint8_t vc, uint8_t fam, const void *body, size_t nbody)
{
	memcpy(out, sig, 12);
	out[12] = vc;
	out[13] = fam;
	out[14] = (uint8_t)(nbody >> 8);
	out[15] = (uint8_t)nbody;
	if (nbody)
		memcpy(out + 16, body, nbody);
	return 16 + nbody;
}

static const uint8_t ip4_block[12] = {192, 0, 2, 1, 198, 51, 100, 7, 0xDC, 0x04, 0x01, 0xBB};

static void test_v2_tcp4_and_tcp6_give_both_addresses_and_ports(void)
{
	uint8_t h[600], b6[36];
	struct proxy_proto pp;
	size_t n = v2(h, 0x21, 0x11, ip4_block, 12);

	memcpy(h + n, "GET", 3); /* the client's bytes: not the header's */
	CU_ASSERT_EQUAL(parse_all_splits(h, n, &pp), 0);
	CU_ASSERT_EQUAL(proxy_proto_parse(h, n + 3, &pp), 0);
	CU_ASSERT_EQUAL(pp.len, 28);
	CU_ASSERT_EQUAL(pp.version, 2);
	CU_ASSERT_EQUAL(pp.local, 0);
	CU_ASSERT_EQUAL(pp.family, AF_INET);
	CU_ASSERT_STRING_EQUAL(addr_text(AF_INET, pp.src), "192.0.2.1");
	CU_ASSERT_STRING_EQUAL(addr_text(AF_INET, pp.dst), "198.51.100.7");
	CU_ASSERT_EQUAL(pp.sport, 56324);
	CU_ASSERT_EQUAL(pp.dport, 443);

	inet_pton(AF_INET6, "2001:db8::1", b6);
	inet_pton(AF_INET6, "2001:db8::2", b6 + 16);
	memcpy(b6 + 32, "\x00\x50\x1F\x90", 4);
	n = v2(h, 0x21, 0x21, b6, 36);
	CU_ASSERT_EQUAL(parse_all_splits(h, n, &pp), 0);
	CU_ASSERT_EQUAL(pp.len, 52);
	CU_ASSERT_EQUAL(pp.family, AF_INET6);
	CU_ASSERT_STRING_EQUAL(addr_text(AF_INET6, pp.src), "2001:db8::1");
	CU_ASSERT_STRING_EQUAL(addr_text(AF_INET6, pp.dst), "2001:db8::2");
	CU_ASSERT_EQUAL(pp.sport, 80);
	CU_ASSERT_EQUAL(pp.dport, 8080);
}

static void test_v2_local_skips_the_block_whatever_it_holds(void)
{
	uint8_t h[600];
	struct proxy_proto pp;
	size_t n = v2(h, 0x20, 0x00, NULL, 0);

	CU_ASSERT_EQUAL(parse_all_splits(h, n, &pp), 0);
	CU_ASSERT_EQUAL(pp.local, 1);
	CU_ASSERT_EQUAL(pp.len, 16);
	/* a LOCAL with an address block and a garbled TLV: not read */
	n = v2(h, 0x20, 0x11, "\1\2\3\4\5\6\7\x8\x9\xA\xB\xC\xFF\xFF", 14);
	CU_ASSERT_EQUAL(parse_all_splits(h, n, &pp), 0);
	CU_ASSERT_EQUAL(pp.local, 1);
	CU_ASSERT_EQUAL(pp.len, 30);
}

static void test_v2_udp_unix_and_unspec_fall_back_to_the_socket_addresses(void)
{
	static const uint8_t fams[] = {0x00, 0x12, 0x22, 0x31, 0x32};
	static const size_t sizes[] = {0, 12, 36, 216, 216};
	uint8_t h[600], body[300];
	struct proxy_proto pp;

	memset(body, 0x41, sizeof(body));
	for (size_t i = 0; i < sizeof(fams); i++) {
		size_t n = v2(h, 0x21, fams[i], body, sizes[i]);

		CU_ASSERT_EQUAL(parse_all_splits(h, n, &pp), 0);
		CU_ASSERT_EQUAL(pp.local, 1);
		CU_ASSERT_EQUAL(pp.len, n);
		if (sizes[i]) { /* an address block cut short */
			n = v2(h, 0x21, fams[i], body, sizes[i] - 1);
			CU_ASSERT_EQUAL(proxy_proto_parse(h, n, &pp), REFUSED);
		}
	}
}

static void test_v2_bad_version_command_family_or_pair_is_refused_early(void)
{
	uint8_t h[64];
	struct proxy_proto pp;
	static const uint8_t bad_fam[] = {0x01, 0x02, 0x10, 0x20, 0x30, 0x13, 0x41, 0x03, 0xFF};

	v2(h, 0x11, 0x11, ip4_block, 12); /* version 1 in binary */
	CU_ASSERT_EQUAL(proxy_proto_parse(h, 13, &pp), REFUSED);
	v2(h, 0x31, 0x11, ip4_block, 12);
	CU_ASSERT_EQUAL(proxy_proto_parse(h, 13, &pp), REFUSED);
	v2(h, 0x22, 0x11, ip4_block, 12); /* command 2 */
	CU_ASSERT_EQUAL(proxy_proto_parse(h, 13, &pp), REFUSED);
	v2(h, 0x2F, 0x11, ip4_block, 12);
	CU_ASSERT_EQUAL(proxy_proto_parse(h, 28, &pp), REFUSED);
	for (size_t i = 0; i < sizeof(bad_fam); i++) {
		v2(h, 0x21, bad_fam[i], ip4_block, 12);
		CU_ASSERT_EQUAL(proxy_proto_parse(h, 28, &pp), REFUSED);
		CU_ASSERT_EQUAL(proxy_proto_parse(h, 16, &pp), REFUSED); /* before the block */
	}
	/* a broken signature, at each of its bytes */
	for (int i = 0; i < 12; i++) {
		v2(h, 0x21, 0x11, ip4_block, 12);
		h[i] ^= 0x20;
		CU_ASSERT_EQUAL(proxy_proto_parse(h, (size_t)i + 1, &pp), REFUSED);
	}
}

static void test_v2_lengths_are_bounded(void)
{
	static uint8_t h[PROXY_PROTO_MAX + 64], body[PROXY_PROTO_MAX];
	struct proxy_proto pp;
	size_t n;

	memcpy(body, ip4_block, 12);
	/* the announced length is checked as soon as it is known */
	v2(h, 0x21, 0x11, body, PROXY_PROTO_MAX - 15);
	CU_ASSERT_EQUAL(proxy_proto_parse(h, 16, &pp), REFUSED);
	v2(h, 0x21, 0x11, body, 0xFFFF > sizeof(body) ? sizeof(body) : 0xFFFF);
	h[14] = h[15] = 0xFF;
	CU_ASSERT_EQUAL(proxy_proto_parse(h, 16, &pp), REFUSED);
	/* the longest accepted: a NOOP TLV filling it */
	body[12] = 0x04;
	body[13] = (uint8_t)((PROXY_PROTO_MAX - 16 - 15) >> 8);
	body[14] = (uint8_t)(PROXY_PROTO_MAX - 16 - 15);
	n = v2(h, 0x21, 0x11, body, PROXY_PROTO_MAX - 16);
	CU_ASSERT_EQUAL(n, PROXY_PROTO_MAX);
	CU_ASSERT_EQUAL(proxy_proto_parse(h, n - 1, &pp), WEIR_EAGAIN);
	CU_ASSERT_EQUAL(proxy_proto_parse(h, n, &pp), 0);
	CU_ASSERT_EQUAL(pp.len, PROXY_PROTO_MAX);
	/* an address block longer than the length: refused before it arrives */
	v2(h, 0x21, 0x21, body, 20);
	CU_ASSERT_EQUAL(proxy_proto_parse(h, 16, &pp), REFUSED);
}

static void test_v2_tlvs_are_walked_and_bounds_checked(void)
{
	uint8_t h[600], b[100];
	struct proxy_proto pp;
	size_t n;

	memcpy(b, ip4_block, 12);
	/* ALPN "h2", a NOOP of 0 bytes, AWS's 0xEA: all skipped */
	memcpy(b + 12, "\x01\x00\x02h2\x04\x00\x00\xEA\x00\x04vpce", 15);
	n = v2(h, 0x21, 0x11, b, 27);
	CU_ASSERT_EQUAL(parse_all_splits(h, n, &pp), 0);
	CU_ASSERT_EQUAL(pp.len, 43);
	CU_ASSERT_STRING_EQUAL(addr_text(AF_INET, pp.src), "192.0.2.1");
	/* a TLV running past the header */
	memcpy(b + 12, "\x01\x00\x05h2", 5);
	n = v2(h, 0x21, 0x11, b, 17);
	CU_ASSERT_EQUAL(proxy_proto_parse(h, n, &pp), REFUSED);
	/* one or two bytes left: not even a TLV's type and length */
	n = v2(h, 0x21, 0x11, b, 13);
	CU_ASSERT_EQUAL(proxy_proto_parse(h, n, &pp), REFUSED);
	n = v2(h, 0x21, 0x11, b, 14);
	CU_ASSERT_EQUAL(proxy_proto_parse(h, n, &pp), REFUSED);
}

static void test_crc32c_matches_rfc_3720s_check_value(void)
{
	static const uint8_t zeros[32];
	uint8_t ones[32];

	memset(ones, 0xFF, sizeof(ones));
	CU_ASSERT_EQUAL(proxy_proto_crc32c(0, "123456789", 9), 0xE3069283u);
	CU_ASSERT_EQUAL(proxy_proto_crc32c(proxy_proto_crc32c(0, "1234", 4), "56789", 5), 0xE3069283u);
	/* RFC 3720 B.4's vectors */
	CU_ASSERT_EQUAL(proxy_proto_crc32c(0, zeros, 32), 0x8A9136AAu);
	CU_ASSERT_EQUAL(proxy_proto_crc32c(0, ones, 32), 0x62A8AB43u);
}

static void test_v2_crc32c_tlv_must_match_the_header(void)
{
	uint8_t h[600], b[100];
	struct proxy_proto pp;
	uint32_t crc;
	size_t n;

	memcpy(b, ip4_block, 12);
	memcpy(b + 12, "\x03\x00\x04\0\0\0\0\x04\x00\x01z", 11);
	n = v2(h, 0x21, 0x11, b, 23);
	crc = proxy_proto_crc32c(0, h, n);
	h[31] = (uint8_t)(crc >> 24);
	h[32] = (uint8_t)(crc >> 16);
	h[33] = (uint8_t)(crc >> 8);
	h[34] = (uint8_t)crc;
	CU_ASSERT_EQUAL(parse_all_splits(h, n, &pp), 0);
	CU_ASSERT_EQUAL(pp.len, n);
	/* any bit flipped elsewhere in the header, or in the checksum */
	for (size_t i = 16; i < n; i++) {
		h[i] ^= 0x01;
		if (i != 28) /* the CRC TLV's type: then it is another TLV, unchecked */
			CU_ASSERT_EQUAL(proxy_proto_parse(h, n, &pp), REFUSED);
		h[i] ^= 0x01;
	}
	CU_ASSERT_EQUAL(proxy_proto_parse(h, n, &pp), 0);
	/* a checksum TLV of another length */
	memcpy(b + 12, "\x03\x00\x03\0\0\0", 6);
	n = v2(h, 0x21, 0x11, b, 18);
	CU_ASSERT_EQUAL(proxy_proto_parse(h, n, &pp), REFUSED);
}

static const struct unit_test tests[] = {
	{"v1 TCP4 gives both addresses and ports", test_v1_tcp4_gives_both_addresses_and_ports},
	{"v1 TCP6 takes every form inet_ntop writes", test_v1_tcp6_takes_every_form_inet_ntop_writes},
	{"v1 UNKNOWN means the socket's addresses", test_v1_unknown_means_the_socket_addresses},
	{"v1 leading zeros and out-of-range numbers are refused",
	 test_v1_leading_zeros_and_out_of_range_numbers_are_refused},
	{"v1 fields need exactly one space and the right family",
	 test_v1_fields_need_exactly_one_space_and_the_right_family},
	{"v1 line ends only with CRLF within 107 bytes", test_v1_line_ends_only_with_crlf_within_107_bytes},
	{"anything else is refused at its first byte", test_anything_else_is_refused_at_its_first_byte},
	{"v2 TCP4 and TCP6 give both addresses and ports", test_v2_tcp4_and_tcp6_give_both_addresses_and_ports},
	{"v2 LOCAL skips the block whatever it holds", test_v2_local_skips_the_block_whatever_it_holds},
	{"v2 UDP, UNIX and UNSPEC fall back to the socket's addresses",
	 test_v2_udp_unix_and_unspec_fall_back_to_the_socket_addresses},
	{"v2 bad version, command, family or pair is refused early",
	 test_v2_bad_version_command_family_or_pair_is_refused_early},
	{"v2 lengths are bounded", test_v2_lengths_are_bounded},
	{"v2 TLVs are walked and bounds-checked", test_v2_tlvs_are_walked_and_bounds_checked},
	{"CRC32C matches RFC 3720's check values", test_crc32c_matches_rfc_3720s_check_value},
	{"v2 CRC32C TLV must match the header", test_v2_crc32c_tlv_must_match_the_header},
};

UNIT_MAIN("worker/proxy_proto", tests)
