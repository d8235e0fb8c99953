// sdnn/linear/policy/cusparse_alg.hpp - the cuSPARSE SpMM algorithms sdnn names (no cuSPARSE header
// needed): the policy tag policy::cusparse_spmm<Alg> (linear/policy/spmm.hpp) names one, and
// the wrapper in linear/vendor/cusparse.cuh maps it to cusparseSpMMAlg_t.
#pragma once

namespace sdnn::policy {

enum class cusparse_alg {
  default_alg,       // CUSPARSE_SPMM_ALG_DEFAULT (CSR or COO)
  csr_alg1,          // CUSPARSE_SPMM_CSR_ALG1
  csr_alg2,          // CUSPARSE_SPMM_CSR_ALG2 (row-major B/C)
  csr_alg3,          // CUSPARSE_SPMM_CSR_ALG3
  coo_alg1,          // CUSPARSE_SPMM_COO_ALG1
  coo_alg2,          // CUSPARSE_SPMM_COO_ALG2
  coo_alg3,          // CUSPARSE_SPMM_COO_ALG3
  coo_alg4,          // CUSPARSE_SPMM_COO_ALG4 (row-major B/C)
  blocked_ell_alg1,  // CUSPARSE_SPMM_BLOCKED_ELL_ALG1
};

}  // namespace sdnn::policy
