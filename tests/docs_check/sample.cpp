// A file the fixtures quote, so they do not depend on the library's code.
int add(int a, int b) {
  return a + b;
}

int twice(int a) {
  return add(a, a);
}
