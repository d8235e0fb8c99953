// The device members of the layer and pipeline types that the host tests (.cpp) use, for
// CUDA builds (linear/sparse_linear.hpp explains the rule). The host tests never call them.
#include <sdnn/sdnn.hpp>

SDNN_INSTANTIATE_SPARSE_LINEAR(float, sdnn::policy::sparse_linear_default);
template class sdnn::sequential<float>;
template class sdnn::pipeline::challenge_network<sdnn::policy::sparse_linear_default>;
