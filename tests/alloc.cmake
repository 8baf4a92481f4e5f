# test_alloc counts every allocation libsift makes: malloc / calloc / realloc / free of
# the objects linked into it are redirected to counting wrappers (works under ASan and
# valgrind too, which see the real calls behind the wrappers).
target_link_options(test_alloc PRIVATE "LINKER:--wrap=malloc,--wrap=calloc,--wrap=realloc,--wrap=free")
