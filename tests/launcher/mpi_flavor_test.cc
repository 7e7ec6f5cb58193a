// DetectFlavor on what real mpiruns print for --version.
#include "tfmpi/launcher/mpi_flavor.h"

#include <gtest/gtest.h>

namespace tfmpi::launcher {
namespace {

TEST(MpiFlavor, OpenMpi) {
  EXPECT_EQ(DetectFlavor("mpirun (Open MPI) 4.1.4\n\nReport bugs to http://www.open-mpi.org/community/help/\n"),
            MpiFlavor::kOpenMpi);
  EXPECT_EQ(DetectFlavor("mpirun (Open MPI) 5.0.3\n"), MpiFlavor::kOpenMpi);
  EXPECT_EQ(DetectFlavor("mpirun (OpenRTE) 1.10.7\n"), MpiFlavor::kOpenMpi);
}

TEST(MpiFlavor, MpichAndHydra) {
  EXPECT_EQ(DetectFlavor("HYDRA build details:\n    Version:    4.0.2\n"), MpiFlavor::kMpich);
  EXPECT_EQ(DetectFlavor("MPICH Version: 3.3\n"), MpiFlavor::kMpich);
  EXPECT_EQ(DetectFlavor("Intel(R) MPI Library for Linux* OS, Version 2021.6\n"), MpiFlavor::kMpich);
}

TEST(MpiFlavor, Unknown) {
  EXPECT_FALSE(DetectFlavor("").has_value());
  EXPECT_FALSE(DetectFlavor("bash: mpirun: command not found\n").has_value());
}

TEST(MpiFlavor, NamesAndSpellings) {
  EXPECT_STREQ(MpiFlavorName(MpiFlavor::kOpenMpi), "Open MPI");
  EXPECT_STREQ(MpiFlavorName(MpiFlavor::kMpich), "MPICH");
  EXPECT_EQ(ParseMpiFlavor("openmpi"), MpiFlavor::kOpenMpi);
  EXPECT_EQ(ParseMpiFlavor("mpich"), MpiFlavor::kMpich);
  EXPECT_FALSE(ParseMpiFlavor("lam").has_value());
}

TEST(MpiFlavor, ReadVersionOfMissingProgramIsNotRecognised) {
  EXPECT_FALSE(DetectFlavor(ReadMpirunVersion("/nonexistent/mpirun")).has_value());
}

}  // namespace
}  // namespace tfmpi::launcher
