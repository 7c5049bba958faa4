/*
 * tlscert.h: a certificate chain and its private key, read from PEM files.
 *
 * Principle: certificates are read where the configuration is read, by the
 * master (as root, before any worker drops privileges), so `weir -t`, start-up
 * and reload all see the same files and fail the same way, and a worker never
 * opens a key file. What is kept is parsed BoringSSL objects; the master
 * makes no SSL_CTX and does no handshake: each worker builds its contexts
 * from these objects when it starts (worker/tls.c).
 *
 * The names a certificate serves are taken from the certificate itself:
 * its subjectAltName DNS names, or its subject CN when it has none; lower
 * case, "*.example.com" kept as written for wildcards.
 *
 * Key material and core dumps: every file is read into an anonymous mapping
 * marked MADV_DONTDUMP and wiped (OPENSSL_cleanse) as soon as it is parsed,
 * so the PEM text of a key is never in a core dump. The parsed EVP_PKEY
 * lives in BoringSSL's heap, which weir cannot mark: it is in a core dump of
 * the master or of a worker (docs/config.md says what to do about it).
 */
#ifndef WEIR_COMMON_TLSCERT_H
#define WEIR_COMMON_TLSCERT_H

#include <stddef.h>
#include <stdint.h>

#include <openssl/base.h>
#include <openssl/x509.h>

#define TLSCERT_NAME_MAX 256 /* one DNS name, including the NUL */
#define TLSCERT_MAX_NAMES 64 /* names kept per certificate; more are ignored */

struct tlscert {
	X509 *leaf;
	STACK_OF(X509) *chain; /* intermediates after the leaf, may be empty */
	EVP_PKEY *key;
	uint8_t *ocsp;         /* DER OCSP response to staple, malloc'd, or NULL */
	size_t ocsp_len;
	int nnames;
	char names[TLSCERT_MAX_NAMES][TLSCERT_NAME_MAX];
};

/* The certificates a TLS listener trusts to sign client certificates. */
struct tlsca {
	STACK_OF(X509) *certs; /* at least one */
};

/*
 * Reads the PEM chain in <cert_path> (leaf first) and the PEM key in
 * <key_path> and checks that the key belongs to the leaf. Returns a
 * malloc'd struct, or NULL with <why> (at most <cap> bytes) saying what is
 * wrong, worded to follow "certificate PATH: ".
 */
/* The reason of the last BoringSSL error, or <dflt> when there is none.
 * Clears the error queue. For messages, in the master and the workers. */
const char *tlscert_reason(const char *dflt);

struct tlscert *tlscert_load(const char *cert_path, const char *key_path, char *why, size_t cap);

/*
 * Reads the DER OCSP response in <path> into <tc>, to be stapled as it is.
 * It must be a well-formed OCSPResponse whose status is "successful"; its
 * signature, certificate and dates are not checked here (the client does:
 * refreshing the file and reloading is the operator's cron job). Returns 0,
 * or -1 with <why> worded to follow "OCSP response PATH: ".
 */
int tlscert_load_ocsp(struct tlscert *tc, const char *path, char *why, size_t cap);

/* Reads the PEM CA certificates in <path> (one at least). Returns a malloc'd
 * struct, or NULL with <why> worded to follow "client_ca PATH: ". */
struct tlsca *tlsca_load(const char *path, char *why, size_t cap);

/* Frees what tlsca_load() returned; NULL is fine. */
void tlsca_free(struct tlsca *ca);

/* Frees what tlscert_load() returned (BoringSSL wipes the key as it frees
 * it); NULL is fine. */
void tlscert_free(struct tlscert *tc);

#endif
