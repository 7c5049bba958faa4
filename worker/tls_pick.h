/*
 * tls_pick.h: choosing a listener's certificate from the ClientHello: the
 * SNI name first (tls_names.h), then the key type the client can verify.
 *
 * Principle: a listener may list an ECDSA and an RSA certificate for the
 * same names, as nginx and HAProxy allow. Among the certificates that fit
 * the name equally well (all exact matches, or else all wildcard matches),
 * or, without SNI or a match, the first certificate and those carrying
 * exactly its names, the first ECDSA one the client can verify is served,
 * else the first RSA one it can verify, else the first candidate (the
 * handshake then fails as it would have anyway). ECDSA is preferred because
 * its handshakes are cheaper for both sides.
 *
 * "Can verify" is read from the ClientHello alone:
 *   - a client offering TLS 1.3 gets 1.3 (weir supports it), so only its
 *     signature_algorithms count: ecdsa_secp256r1_sha256 (0x0403) for a
 *     P-256 key, 0x0503 for P-384, 0x0603 for P-521 (TLS 1.3 binds the
 *     curve to the scheme), rsa_pss_rsae_* for RSA;
 *   - any other client gets TLS 1.2 at best: it must also offer one of
 *     our ECDHE-ECDSA (or ECDHE-RSA) suites, and a signature_algorithms
 *     extension, when sent, must list such a scheme (RFC 5246 7.4.1.4.1:
 *     without the extension, SHA-1 with the certificate's key type is
 *     assumed, which BoringSSL accepts).
 *
 * Nothing here allocates or calls BoringSSL's SSL layer: the functions
 * read byte spans the caller takes from the SSL_CLIENT_HELLO, so they run
 * in the early (select_certificate) callback and in unit tests alike.
 */
#ifndef WEIR_WORKER_TLS_PICK_H
#define WEIR_WORKER_TLS_PICK_H

#include <stddef.h>
#include <stdint.h>

#include "worker/tls_names.h"

/* A certificate's key type, as far as choosing goes. */
enum {
	TLS_PICK_KEY_OTHER = 0, /* never preferred, served when listed first */
	TLS_PICK_KEY_RSA,
	TLS_PICK_KEY_P256,
	TLS_PICK_KEY_P384,
	TLS_PICK_KEY_P521,
};

/* The parts of a ClientHello the choice reads; a span is NULL (and 0) when
 * the extension is absent. Extension spans are the extension's contents,
 * without its type and length. */
struct tls_pick_raw {
	uint16_t version; /* legacy_version */
	const uint8_t *suites;
	size_t suites_len;
	const uint8_t *sni;
	size_t sni_len;
	const uint8_t *sigalgs;
	size_t sigalgs_len;
	const uint8_t *versions;
	size_t versions_len;
};

/* What the ClientHello says, parsed. <host> points into the raw span. */
struct tls_pick_hello {
	const char *host; /* NULL: no SNI */
	size_t host_len;
	int tls13;        /* offers TLS 1.3: 1.3 is what it gets */
	int has_sigalgs;  /* sent signature_algorithms */
	unsigned sigalgs; /* TLS_PICK_SIG_* bits of the schemes listed */
	int ecdsa_suite;  /* offers one of our ECDHE-ECDSA suites */
	int rsa_suite;    /* offers one of our ECDHE-RSA suites */
};

#define TLS_PICK_SIG_P256 0x01u /* ecdsa_secp256r1_sha256 */
#define TLS_PICK_SIG_P384 0x02u /* ecdsa_secp384r1_sha384 */
#define TLS_PICK_SIG_P521 0x04u /* ecdsa_secp521r1_sha512 */
#define TLS_PICK_SIG_PSS  0x08u /* rsa_pss_rsae_sha256/384/512 */
#define TLS_PICK_SIG_PKCS 0x10u /* rsa_pkcs1_sha1/256/384/512 (TLS 1.2 only) */

/* The key type of <pkey_id> (EVP_PKEY_id) with curve <curve_nid> (for EC
 * keys, NID_undef otherwise). */
int tls_pick_key_type(int pkey_id, int curve_nid);

/*
 * Parses <raw> into <out> with bounds checks on every length. Returns 0,
 * or -1 when an extension is malformed (BoringSSL refuses such a hello
 * itself: the caller leaves the choice to the default certificate).
 */
int tls_pick_parse_hello(const struct tls_pick_raw *raw, struct tls_pick_hello *out);

/* Whether the client of <h> can verify a signature by a key of <key>. */
int tls_pick_key_usable(const struct tls_pick_hello *h, int key);

/*
 * The certificate (index within its listener) for hello <h>. <names> are
 * the listener's <nnames> names in certificate order; <keys> the key type
 * of each of its <ncerts> certificates; <siblings> has bit k set when
 * certificate k carries exactly the names of certificate 0 (bit 0 always).
 */
int tls_pick_choose_cert(const struct tls_name *names, int nnames, const uint8_t *keys, int ncerts, uint64_t siblings,
                         const struct tls_pick_hello *h);

/* The <siblings> mask for tls_pick_choose_cert(): certificates whose name
 * set equals certificate 0's. <ncerts> is at most 64. */
uint64_t tls_pick_find_siblings(const struct tls_name *names, int nnames, int ncerts);

#endif
