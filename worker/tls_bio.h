/*
 * tls_bio.h: the socket under a TLS connection, read ahead.
 *
 * BoringSSL reads a record in two calls, its 5-byte header and then its
 * body, and with a plain socket BIO each call is a read(2): two system
 * calls for every small request. This BIO reads whatever the socket holds
 * into a worker buffer (one read(2) for a whole request, or for several
 * pipelined records) and serves BoringSSL's calls from it. The buffer is
 * taken from the slab only while it holds bytes, so an idle connection
 * keeps none. A large record body, asked for whole, is read straight into
 * BoringSSL's buffer with no copy. Writes go to the socket as they come.
 *
 * Because bytes can wait in the BIO that no readiness event will announce,
 * a reader that finds the socket "drained" must also ask tls_bio_pending().
 */
#ifndef WEIR_WORKER_TLS_BIO_H
#define WEIR_WORKER_TLS_BIO_H

#include <openssl/ssl.h>

/* Sets up the method; once per worker, before any tls_bio_attach(). */
int tls_bio_init(void);
void tls_bio_cleanup(void);

/* Gives <ssl> a read-ahead BIO over socket <fd> for both directions (in
 * place of SSL_set_fd). Returns 0, or -1 when out of memory. */
int tls_bio_attach(SSL *ssl, int fd);

/* 1 when <ssl> has bytes no event will announce: read ahead into its BIO,
 * or held by BoringSSL (decrypted, or part of a record). */
int tls_bio_pending(const SSL *ssl);

#endif
