// Installs the device members of the float layer and pipeline types that the host tests (.cpp)
// use, in CUDA builds, by explicit instantiation (layers/layer.hpp explains the rule). The host
// tests link without it; test_layer_checks.cpp checks that these types reach their device
// bodies and that the types no .cu installs throw not_compiled.
#include <sdnn/sdnn.hpp>

SDNN_INSTANTIATE_SPARSE_LINEAR(float, sdnn::policy::sparse_linear_default);
template class sdnn::sequential<float>;
template class sdnn::pipeline::challenge_network<sdnn::policy::sparse_linear_default>;
