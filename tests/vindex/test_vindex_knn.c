/* placeholder */
#include "testutil.h"
int main(void) { return test_summary("test_vindex_knn"); }
