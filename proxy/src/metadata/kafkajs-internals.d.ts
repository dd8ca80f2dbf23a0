// kafkajs ships no types for its internals; kafkajs-module.ts reaches one of them (and says why).
declare module 'kafkajs/src/network/requestQueue/index.js';
