//! placeholder until the docker tests land
