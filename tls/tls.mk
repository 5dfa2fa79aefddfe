# tls/tls.mk - libgoro-tls, TLS streams on OpenSSL (include/goro/tls.h,
# docs/tls.md), its pkg-config file and its test binary. Included by the
# top-level Makefile after BUILD, CC, the flags, STATIC_LIB and SHARED_LIB
# are defined. A separate library so that a program that does not use TLS
# does not link OpenSSL (libssl-dev, a core dependency).
#
#   make test-tls    builds and runs build/tests/goro_tls_tests
#
# The aarch64 cross sysroot has no OpenSSL: that build goes without it.
ifeq ($(.DEFAULT_GOAL),)
.DEFAULT_GOAL := all
endif

TLS_SONAME := libgoro-tls.so.$(VERSION_MAJOR)
TLS_STATIC_LIB := $(BUILD)/libgoro-tls.a
TLS_SHARED_REAL := $(BUILD)/libgoro-tls.so.$(VERSION)
TLS_SHARED_LIB := $(BUILD)/libgoro-tls.so
TLS_OBJS := $(patsubst %.c,$(BUILD)/obj/%.o,$(wildcard tls/*.c))
SSL_LIBS := -lssl -lcrypto
TLS_TEST_BIN := $(BUILD)/tests/goro_tls_tests
TLS_BUILT := $(if $(SYSROOT),,1)

.PHONY: tls-lib test-tls install-tls uninstall-tls
tls-lib: $(if $(TLS_BUILT),$(TLS_STATIC_LIB) $(if $(STATIC),,$(TLS_SHARED_LIB)))
all: tls-lib

$(TLS_OBJS): $(wildcard tls/*.h)

$(TLS_STATIC_LIB): $(TLS_OBJS)
	@mkdir -p $(@D)
	$(call say,AR,$@)
	$(Q)rm -f $@ && $(CROSS)ar rcs $@ $^

# RUNPATH $ORIGIN: libgoro.so.0 is found beside it. A program's own
# RUNPATH (goro.pc's rpath) covers only its direct needs, and a program
# that calls only goro_tls_* has -lgoro dropped by --as-needed.
$(TLS_SHARED_REAL): $(TLS_OBJS) $(SHARED_LIB)
	$(call say,LINK,$@)
	$(Q)$(CC) -shared -Wl,-soname,$(TLS_SONAME) -Wl,--no-undefined -Wl,-rpath,'$$ORIGIN' \
	  $(ALL_LDFLAGS) -o $@ $(TLS_OBJS) -L$(BUILD) -lgoro $(SSL_LIBS)

$(TLS_SHARED_LIB): $(TLS_SHARED_REAL)
	$(Q)ln -sf libgoro-tls.so.$(VERSION) $(BUILD)/$(TLS_SONAME)
	$(Q)ln -sf libgoro-tls.so.$(VERSION) $@

# Requires goro; OpenSSL only for a static link (libgoro-tls.so records
# its own dependencies). Written afresh on every install, as goro.pc is.
.PHONY: $(BUILD)/goro-tls.pc
$(BUILD)/goro-tls.pc:
	@mkdir -p $(@D)
	printf '%s\n' 'prefix=$(PREFIX)' 'libdir=$(LIBDIR)' 'includedir=$(INCLUDEDIR)' '' \
	  'Name: goro-tls' 'Description: TLS streams for goro, on OpenSSL' 'Version: $(VERSION)' \
	  'Requires: goro' 'Requires.private: libssl libcrypto' \
	  'Libs: -L$${libdir} -lgoro-tls' 'Cflags: -I$${includedir}' > $@

$(BUILD)/obj/tests/tls/%.o: tests/tls/%.c $(HEADERS) $(DEPS_STAMP)
	@mkdir -p $(@D)
	$(call say,CC,$@)
	$(Q)$(CC) $(ALL_CFLAGS) -DTLS_MKCERTS='"$(CURDIR)/tests/tls/mkcerts.sh"' -c $< -o $@

$(TLS_TEST_BIN): $(BUILD)/obj/tests/tls/test_tls.o $(TLS_STATIC_LIB) $(STATIC_LIB)
	@mkdir -p $(@D)
	$(call say,LINK,$@)
	$(Q)$(CC) $(ALL_CFLAGS) $(ALL_LDFLAGS) -o $@ $< $(TLS_STATIC_LIB) $(STATIC_LIB) \
	  $(SSL_LIBS) $(CHECK_LIBS) $(LIBS)

# Under TSan, a race inside OpenSSL itself is suppressed (tests/tls/tsan.supp).
TLS_TSAN_ENV = $(if $(filter thread,$(SANITIZE)),TSAN_OPTIONS="$$TSAN_OPTIONS suppressions=$(CURDIR)/tests/tls/tsan.supp")

test-tls: $(if $(TLS_BUILT),$(TLS_TEST_BIN))
	$(if $(TLS_BUILT),$(TLS_TSAN_ENV) $(RUNNER) $(TLS_TEST_BIN),@echo "test-tls: skipped (no OpenSSL for ARCH=$(ARCH))")

install-tls: tls-lib $(BUILD)/goro-tls.pc
	install -m 644 $(TLS_STATIC_LIB) $(DESTDIR)$(LIBDIR)/libgoro-tls.a
	install -m 755 $(TLS_SHARED_REAL) $(DESTDIR)$(LIBDIR)/libgoro-tls.so.$(VERSION)
	ln -sf libgoro-tls.so.$(VERSION) $(DESTDIR)$(LIBDIR)/$(TLS_SONAME)
	ln -sf libgoro-tls.so.$(VERSION) $(DESTDIR)$(LIBDIR)/libgoro-tls.so
	install -m 644 $(BUILD)/goro-tls.pc $(DESTDIR)$(LIBDIR)/pkgconfig/goro-tls.pc

uninstall-tls:
	rm -f $(DESTDIR)$(LIBDIR)/libgoro-tls.a $(DESTDIR)$(LIBDIR)/libgoro-tls.so \
	  $(DESTDIR)$(LIBDIR)/$(TLS_SONAME) $(DESTDIR)$(LIBDIR)/libgoro-tls.so.$(VERSION) \
	  $(DESTDIR)$(LIBDIR)/pkgconfig/goro-tls.pc
