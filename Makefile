# qir: build everything into $(BUILD); see README.md.
#   make            IR library and every tool into build/bin
#   make check      every test (lit, sanitizer build, conformance, backends)
#   make demo       the pipeline on a bundled example
#   make install    PREFIX=/usr/local (tools in bin, man pages in share/man/man1)
#   make uninstall  PREFIX=/usr/local (removes what install put there)
#   make fuzz       libFuzzer target for the parser (clang)

BUILD   ?= build
PREFIX  ?= /usr/local
MANDIR  ?= $(PREFIX)/share/man
CC      ?= cc
OPT     ?= -O2
SAN     ?=
CFLAGS_BASE = -std=c11 -Wall -Wextra -Werror -g $(OPT) -D_POSIX_C_SOURCE=200809L \
              -I qir -I $(BUILD)/gen
ifneq ($(SAN),)
CFLAGS_BASE += -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all
LDFLAGS_SAN  = -fsanitize=address,undefined
endif
# Static tools for machines without our Debian libraries (bench/gpu/run.sh):
#   make BUILD=build/static STATIC=1
ifneq ($(STATIC),)
LDFLAGS_SAN += -static
endif
CFLAGS  += $(CFLAGS_BASE)
LDLIBS  += -lprotobuf-c -lm

ONNX_PROTO ?= /usr/include/onnx/onnx.proto
TOOLS = onnx2qir qopt qcodegen qviz qrun

# ---------------------------------------------------------------- library
GEN     = $(BUILD)/gen
LIB_SRC = $(wildcard qir/*.c)
LIB_OBJ = $(LIB_SRC:%.c=$(BUILD)/obj/%.o) $(GEN)/qir.tab.o $(GEN)/lex.yy.o $(GEN)/onnx.pb-c.o
LIB     = $(BUILD)/libqir.a

all: $(TOOLS:%=$(BUILD)/bin/%)

$(GEN)/qir.tab.c $(GEN)/qir.tab.h &: grammar/qir.y
	@mkdir -p $(GEN)
	bison -Wall -Werror -d -o $(GEN)/qir.tab.c $<

$(GEN)/lex.yy.c $(GEN)/lex.yy.h &: grammar/qir.l $(GEN)/qir.tab.h
	@mkdir -p $(GEN)
	flex --header-file=$(GEN)/lex.yy.h -o $(GEN)/lex.yy.c $<

# Generated C is compiled with the project's flags except those flex's output trips.
# The parser's actions name qir.h's enums (expression functions, opcodes).
$(GEN)/%.o: $(GEN)/%.c $(wildcard qir/*.h) qir/ops.def
	$(CC) $(CFLAGS) -Wno-unused-function -Wno-sign-compare -Wno-unused-parameter -c -o $@ $<

$(BUILD)/obj/%.o: %.c $(GEN)/qir.tab.h $(GEN)/lex.yy.h $(GEN)/onnx.pb-c.h qir/qir.h qir/ops.def
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -MMD -MP -c -o $@ $<

$(LIB): $(LIB_OBJ)
	@rm -f $@
	ar rcs $@ $^

# ---------------------------------------------------------------- tools
# Each tool is every .c file in tools/NAME linked with the library.
define tool_rule
$(1)_SRC = $$(wildcard tools/$(1)/*.c)
$(1)_OBJ = $$($(1)_SRC:%.c=$(BUILD)/obj/%.o)
$(BUILD)/bin/$(1): $$($(1)_OBJ) $(LIB)
	@mkdir -p $$(dir $$@)
	$$(CC) $$(CFLAGS) $(LDFLAGS_SAN) -o $$@ $$^ $$(LDLIBS)
endef

# ONNX protobuf-c code, generated at build time from Debian's onnx.proto: the
# importer reads models with it and qir/tensorio.c reads TensorProto files.
$(GEN)/onnx.pb-c.c $(GEN)/onnx.pb-c.h &: $(ONNX_PROTO)
	@mkdir -p $(GEN)/proto
	cp $(ONNX_PROTO) $(GEN)/proto/onnx.proto
	cd $(GEN)/proto && protoc-c --c_out=.. onnx.proto

$(foreach t,$(TOOLS),$(eval $(call tool_rule,$(t))))

# The C back end's emulation of GPU instructions (tools/qcodegen/runtime, one
# file per instruction family), printed into the programs it generates: each
# file becomes a C string literal that print_sm80.c includes.
RT_H   = $(wildcard tools/qcodegen/runtime/*.h)
RT_INC = $(RT_H:tools/qcodegen/runtime/%.h=$(GEN)/runtime/%.inc)
$(GEN)/runtime/%.inc: tools/qcodegen/runtime/%.h
	@mkdir -p $(dir $@)
	sed -e 's/\\/\\\\/g' -e 's/"/\\"/g' -e 's/^/"/' -e 's/$$/\\n"/' $< > $@
$(BUILD)/obj/tools/qcodegen/print_sm80.o $(BUILD)/obj/tools/qcodegen/print_sm90.o: $(RT_INC)

-include $(shell find $(BUILD)/obj -name '*.d' 2>/dev/null)

# ---------------------------------------------------------------- tests
LIT      ?= /usr/lib/llvm-14/build/utils/lit/lit.py
ONNX_TESTS ?= $(abspath ../shared/onnx-tests)
export ONNX_TESTS

deps:
	@sh scripts/deps.sh

check: deps
	@sh scripts/check.sh

demo: deps all
	@sh scripts/demo.sh

install: all
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(MANDIR)/man1
	install -m 755 $(TOOLS:%=$(BUILD)/bin/%) $(DESTDIR)$(PREFIX)/bin
	install -m 644 $(TOOLS:%=docs/man/%.1) $(DESTDIR)$(MANDIR)/man1

# Removes exactly what install wrote (the directories stay: they may be shared).
uninstall:
	rm -f $(TOOLS:%=$(DESTDIR)$(PREFIX)/bin/%) $(TOOLS:%=$(DESTDIR)$(MANDIR)/man1/%.1)

fuzz:
	@sh scripts/fuzz.sh

# Redraws the pictures in docs/img shown in README.md.
docs-pictures: all
	@QIR_BIN=$(abspath $(BUILD))/bin sh scripts/docs-pictures.sh

clean:
	rm -rf build

.PHONY: all check demo install uninstall fuzz clean deps docs-pictures
